#include "udp_batch.h"

#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace rdmad::fabric {
namespace {

[[noreturn]] void fail(const char* what, const char* call) {
  throw std::runtime_error(std::string(what) + ": " + call + ": " + std::strerror(errno));
}

void set_int(int fd, int level, int opt, int value, const char* what, const char* call) {
  if (setsockopt(fd, level, opt, &value, sizeof value) != 0) fail(what, call);
}

constexpr int kSocketBufferBytes = 4 << 20;

}  // namespace

UdpSocket::UdpSocket(const Endpoint& bind_to, const char* what) : family_(bind_to.family()) {
  fd_ = socket(family_, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) fail(what, "socket");
  // Bursts into a port must queue in the port, not die in the socket buffer (capped by rmem_max).
  set_int(fd_, SOL_SOCKET, SO_RCVBUF, kSocketBufferBytes, what, "setsockopt(SO_RCVBUF)");
  set_int(fd_, SOL_SOCKET, SO_SNDBUF, kSocketBufferBytes, what, "setsockopt(SO_SNDBUF)");
  if (family_ == AF_INET6) {
    set_int(fd_, IPPROTO_IPV6, IPV6_RECVTCLASS, 1, what, "setsockopt(IPV6_RECVTCLASS)");
    set_int(fd_, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1, what, "setsockopt(IPV6_RECVPKTINFO)");
  } else {
    set_int(fd_, IPPROTO_IP, IP_RECVTOS, 1, what, "setsockopt(IP_RECVTOS)");
    set_int(fd_, IPPROTO_IP, IP_PKTINFO, 1, what, "setsockopt(IP_PKTINFO)");
    set_int(fd_, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO, what, "setsockopt(IP_MTU_DISCOVER)");
  }
  if (bind(fd_, bind_to.sa(), bind_to.length()) != 0) {
    const int err = errno;
    close(fd_);
    fd_ = -1;
    errno = err;
    fail(what, ("bind " + bind_to.to_string()).c_str());
  }
}

UdpSocket::~UdpSocket() {
  if (fd_ >= 0) close(fd_);
}

Endpoint UdpSocket::local_endpoint() const {
  Endpoint e;
  socklen_t len = sizeof e.addr;
  if (getsockname(fd_, e.sa(), &len) != 0) fail("socket", "getsockname");
  return e;
}

RecvBatch::RecvBatch() : data_(kIoBatch * kMaxDatagramBytes) {
  for (size_t i = 0; i < kIoBatch; ++i) {
    iov_[i] = {data_.data() + i * kMaxDatagramBytes, kMaxDatagramBytes};
  }
}

size_t RecvBatch::receive(const UdpSocket& socket) {
  for (size_t i = 0; i < kIoBatch; ++i) {
    msghdr& h = msgs_[i].msg_hdr;
    h = msghdr{};
    h.msg_name = &from_[i];
    h.msg_namelen = sizeof from_[i];
    h.msg_iov = &iov_[i];
    h.msg_iovlen = 1;
    h.msg_control = ctrl_[i].data();
    h.msg_controllen = ctrl_[i].size();
  }
  const int n = recvmmsg(socket.fd(), msgs_.data(), kIoBatch, MSG_DONTWAIT, nullptr);
  return n > 0 ? static_cast<size_t>(n) : 0;
}

ReceivedDatagram RecvBatch::get(size_t i) {
  msghdr& h = msgs_[i].msg_hdr;
  ReceivedDatagram d;
  d.truncated = (h.msg_flags & MSG_TRUNC) != 0;
  d.data = {data_.data() + i * kMaxDatagramBytes, std::min<size_t>(msgs_[i].msg_len, kMaxDatagramBytes)};
  d.from = reinterpret_cast<const sockaddr*>(&from_[i]);
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
    // IPv4 delivers the TOS as one byte, IPv6 the traffic class as an int.
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
      d.tos = *CMSG_DATA(c);
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
      int v;
      std::memcpy(&v, CMSG_DATA(c), sizeof v);
      d.tos = static_cast<uint8_t>(v);
    } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
      in_pktinfo pi;
      std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
      auto* to = reinterpret_cast<sockaddr_in*>(&d.to);
      to->sin_family = AF_INET;
      to->sin_addr = pi.ipi_addr;  // the header's destination, not the interface's address
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
      in6_pktinfo pi;
      std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
      auto* to = reinterpret_cast<sockaddr_in6*>(&d.to);
      to->sin6_family = AF_INET6;
      to->sin6_addr = pi.ipi6_addr;
    }
  }
  return d;
}

SendBatch::SendBatch(const Endpoint& to) : to_(to) {}

void SendBatch::add(std::span<const uint8_t> data, uint8_t tos) {
  if (count_ == kIoBatch) std::abort();  // broken invariant: callers flush a full batch first
  const size_t i = count_++;
  iov_[i] = {const_cast<uint8_t*>(data.data()), data.size()};
  msghdr& h = msgs_[i].msg_hdr;
  h = msghdr{};
  h.msg_name = to_.sa();
  h.msg_namelen = to_.length();
  h.msg_iov = &iov_[i];
  h.msg_iovlen = 1;
  h.msg_control = ctrl_[i].data();
  h.msg_controllen = CMSG_SPACE(sizeof(int));
  cmsghdr* c = CMSG_FIRSTHDR(&h);
  c->cmsg_level = to_.family() == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP;
  c->cmsg_type = to_.family() == AF_INET6 ? IPV6_TCLASS : IP_TOS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  const int v = tos;
  std::memcpy(CMSG_DATA(c), &v, sizeof v);
}

size_t SendBatch::flush(const UdpSocket& socket) {
  size_t sent = 0;
  size_t refused = 0;
  while (sent < count_) {
    const int n = sendmmsg(socket.fd(), msgs_.data() + sent, static_cast<unsigned>(count_ - sent), 0);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      ++sent;  // the first datagram is refused (e.g. ENOBUFS, EAGAIN); skip it, keep the rest
      ++refused;
    }
  }
  count_ = 0;
  return refused;
}

}  // namespace rdmad::fabric
