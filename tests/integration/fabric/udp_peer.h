#pragma once
// A loopback UDP endpoint for fabric tests: sends with a TOS per datagram (IP_TOS cmsg) and
// receives with the TOS read back through IP_RECVTOS, waiting with a deadline (never a sleep).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include "rdmad/tools/fabric/endpoint.h"

namespace rdmad::fabric::test {

struct Datagram {
  std::vector<uint8_t> data;
  uint8_t tos = 0;
  int64_t kernel_ns = 0;  // when the datagram reached the socket (SO_TIMESTAMPNS, CLOCK_REALTIME)
};

class UdpPeer {
 public:
  explicit UdpPeer(const char* bind_to = "127.0.0.1:0") {
    const Endpoint e = Endpoint::parse(bind_to);
    fd_ = socket(e.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error("socket");
    const int one = 1;
    const int buf = 4 << 20;
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    setsockopt(fd_, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
    if (e.family() == AF_INET6) {
      setsockopt(fd_, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof one);
    } else {
      setsockopt(fd_, IPPROTO_IP, IP_RECVTOS, &one, sizeof one);
    }
    if (bind(fd_, e.sa(), e.length()) != 0) throw std::runtime_error("bind");
    socklen_t len = sizeof local_.addr;
    getsockname(fd_, local_.sa(), &len);
  }
  ~UdpPeer() { close(fd_); }
  UdpPeer(const UdpPeer&) = delete;
  UdpPeer& operator=(const UdpPeer&) = delete;

  const Endpoint& endpoint() const { return local_; }

  // Sends one datagram with the given TOS / traffic class; blocks while the socket buffer is full.
  void send(const Endpoint& to, std::span<const uint8_t> data, uint8_t tos) {
    iovec iov{const_cast<uint8_t*>(data.data()), data.size()};
    alignas(cmsghdr) uint8_t ctrl[CMSG_SPACE(sizeof(int))] = {};
    msghdr h{};
    h.msg_name = const_cast<sockaddr*>(to.sa());
    h.msg_namelen = to.length();
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    h.msg_control = ctrl;
    h.msg_controllen = sizeof ctrl;
    cmsghdr* c = CMSG_FIRSTHDR(&h);
    c->cmsg_level = to.family() == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP;
    c->cmsg_type = to.family() == AF_INET6 ? IPV6_TCLASS : IP_TOS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    const int v = tos;
    std::memcpy(CMSG_DATA(c), &v, sizeof v);
    while (sendmsg(fd_, &h, 0) < 0) {
      if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR) throw std::runtime_error("sendmsg");
    }
  }

  // Waits up to `timeout` for one datagram (polls only when none is queued).
  std::optional<Datagram> receive(std::chrono::milliseconds timeout) {
    Datagram d;
    iovec iov{buf_.data(), buf_.size()};
    alignas(cmsghdr) uint8_t ctrl[128];
    msghdr h{};
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    h.msg_control = ctrl;
    h.msg_controllen = sizeof ctrl;
    ssize_t n = recvmsg(fd_, &h, MSG_DONTWAIT);
    if (n < 0) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
      h.msg_controllen = sizeof ctrl;
      n = recvmsg(fd_, &h, MSG_DONTWAIT);
      if (n < 0) return std::nullopt;
    }
    d.data.assign(buf_.begin(), buf_.begin() + n);
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
      if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) d.tos = *CMSG_DATA(c);
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
        timespec ts;
        std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
        d.kernel_ns = static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
      }
      if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
        int v;
        std::memcpy(&v, CMSG_DATA(c), sizeof v);
        d.tos = static_cast<uint8_t>(v);
      }
    }
    return d;
  }

  // Receives until `count` datagrams arrived or nothing came for `idle`.
  std::vector<Datagram> receive_all(size_t count, std::chrono::milliseconds idle) {
    std::vector<Datagram> out;
    out.reserve(count);
    while (out.size() < count) {
      auto d = receive(idle);
      if (!d) break;
      out.push_back(std::move(*d));
    }
    return out;
  }

 private:
  int fd_ = -1;
  Endpoint local_;
  std::vector<uint8_t> buf_ = std::vector<uint8_t>(65536);
};

// 8-byte big-endian sequence number followed by a pattern derived from it.
inline std::vector<uint8_t> numbered(uint64_t seq, size_t size) {
  std::vector<uint8_t> d(std::max<size_t>(size, 8));
  for (int i = 0; i < 8; ++i) d[static_cast<size_t>(i)] = static_cast<uint8_t>(seq >> (56 - 8 * i));
  for (size_t i = 8; i < d.size(); ++i) d[i] = static_cast<uint8_t>(seq * 131 + i * 7);
  return d;
}

inline uint64_t seq_of(const std::vector<uint8_t>& d) {
  uint64_t s = 0;
  for (size_t i = 0; i < 8 && i < d.size(); ++i) s = (s << 8) | d[i];
  return s;
}

}  // namespace rdmad::fabric::test
