#pragma once
// Attackers on loopback, written for these tests (not the project's own peer code):
// - OffPathSender: a plain UDP socket on another address; it sees no traffic and cannot forge its
//   source, but seals every packet with a valid ICRC for its real headers, so a drop is the
//   receiver's source check, not its ICRC check.
// - RawSpoofer: a raw IPv4 socket (IP_HDRINCL) that writes any source address and port, with the
//   ICRC sealed over the forged headers (root only).
// - LoopbackSniffer: an AF_PACKET socket on lo that reads the RoCEv2 packets crossing it, to learn
//   QPNs as an attacker who can see the wire would (root only).
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "rdmad/roce/packet.h"

namespace rdmad::security::test {

inline roce::IpAddr v4(const char* dotted) {
  in_addr a{};
  inet_pton(AF_INET, dotted, &a);
  return roce::IpAddr::v4(ntohl(a.s_addr));
}

inline roce::IpUdpInfo headers(const roce::IpAddr& from, uint16_t from_port, const roce::IpAddr& to, uint16_t to_port) {
  roce::IpUdpInfo ip;
  ip.src = from;
  ip.src_port = from_port;
  ip.dst = to;
  ip.dst_port = to_port;
  return ip;
}

inline sockaddr_in sockaddr_of(const roce::IpAddr& ip, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  std::memcpy(&sa.sin_addr, ip.bytes.data(), 4);
  return sa;
}

class OffPathSender {
 public:
  // Bound to `address` and `port` (0: any).
  OffPathSender(const char* address, uint16_t port) : ip_(v4(address)) {
    fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa = sockaddr_of(ip_, port);
    ok_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    socklen_t len = sizeof sa;
    if (ok_) getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
  }
  ~OffPathSender() {
    if (fd_ >= 0) close(fd_);
  }
  OffPathSender(const OffPathSender&) = delete;
  OffPathSender& operator=(const OffPathSender&) = delete;
  bool ok() const { return ok_; }
  uint16_t port() const { return port_; }

  bool send(const roce::Packet& pkt, const roce::IpAddr& to, uint16_t to_port) const {
    uint8_t out[4200];
    const size_t n = roce::encode_datagram(headers(ip_, port_, to, to_port), pkt, out);
    const sockaddr_in sa = sockaddr_of(to, to_port);
    return n != 0 && sendto(fd_, out, n, 0, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == static_cast<ssize_t>(n);
  }

 private:
  roce::IpAddr ip_;
  uint16_t port_ = 0;
  int fd_ = -1;
  bool ok_ = false;
};

class RawSpoofer {
 public:
  RawSpoofer() {
    fd_ = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);  // IPPROTO_RAW implies IP_HDRINCL
    if (fd_ < 0) why_ = std::string("socket(AF_INET, SOCK_RAW, IPPROTO_RAW): ") + std::strerror(errno);
  }
  ~RawSpoofer() {
    if (fd_ >= 0) close(fd_);
  }
  RawSpoofer(const RawSpoofer&) = delete;
  RawSpoofer& operator=(const RawSpoofer&) = delete;
  // Empty when raw sockets work here; the reason otherwise (GTEST_SKIP with it).
  const std::string& unavailable() const { return why_; }

  // One IPv4 frame from `from`:`from_port` (forged) to `to`:`to_port`, DF set and IP id 0 (what a
  // soft NIC sends), ICRC over those headers.
  bool send(const roce::Packet& pkt, const roce::IpAddr& from, uint16_t from_port, const roce::IpAddr& to,
            uint16_t to_port) const {
    uint8_t frame[4300];
    const size_t n = roce::encode_frame(headers(from, from_port, to, to_port), pkt, frame);
    const sockaddr_in sa = sockaddr_of(to, to_port);
    return n != 0 &&
           sendto(fd_, frame, n, 0, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == static_cast<ssize_t>(n);
  }

 private:
  int fd_ = -1;
  std::string why_;
};

// What the sniffer saw of one RoCEv2 packet: the UDP ports and the BTH's destination QP. Only the
// UDP header and the BTH are read, so a coalesced (UDP_SEGMENT) run counts as its first packet.
struct Seen {
  roce::IpAddr src, dst;
  uint16_t src_port = 0, dst_port = 0;
  uint8_t opcode = 0;
  uint32_t dest_qp = 0;
};

class LoopbackSniffer {
 public:
  LoopbackSniffer() {
    fd_ = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_IP));
    if (fd_ < 0) {
      why_ = std::string("socket(AF_PACKET): ") + std::strerror(errno);
      return;
    }
    const int bytes = 16 << 20;  // the learning transfer must not overflow it before its ACK
    if (setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) != 0) {
      setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
    }
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_IP);
    sll.sll_ifindex = static_cast<int>(if_nametoindex("lo"));
    if (bind(fd_, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) why_ = std::string("bind lo: ") + std::strerror(errno);
  }
  ~LoopbackSniffer() {
    if (fd_ >= 0) close(fd_);
  }
  LoopbackSniffer(const LoopbackSniffer&) = delete;
  LoopbackSniffer& operator=(const LoopbackSniffer&) = delete;
  const std::string& unavailable() const { return why_; }

  // The next packet to `to`:`to_port` whose BTH opcode satisfies `want`, by the deadline.
  template <class Want>
  std::optional<Seen> next(const roce::IpAddr& to, uint16_t to_port, Want want, std::chrono::milliseconds deadline) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    uint8_t buf[70000];
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 10) <= 0) continue;
      const ssize_t n = recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (n < 20 + 8 + 12 || (buf[0] >> 4) != 4 || buf[9] != IPPROTO_UDP) continue;
      const size_t ihl = (buf[0] & 0x0F) * 4u;
      if (static_cast<size_t>(n) < ihl + 8 + 12) continue;
      Seen s;
      std::memcpy(s.src.bytes.data(), buf + 12, 4);
      std::memcpy(s.dst.bytes.data(), buf + 16, 4);
      const uint8_t* udp = buf + ihl;
      s.src_port = static_cast<uint16_t>(udp[0] << 8 | udp[1]);
      s.dst_port = static_cast<uint16_t>(udp[2] << 8 | udp[3]);
      const uint8_t* bth = udp + 8;
      s.opcode = bth[0];
      s.dest_qp = static_cast<uint32_t>(bth[5]) << 16 | static_cast<uint32_t>(bth[6]) << 8 | bth[7];
      if (s.dst == to && s.dst_port == to_port && want(s.opcode)) return s;
    }
    return std::nullopt;
  }

 private:
  int fd_ = -1;
  std::string why_;
};

}  // namespace rdmad::security::test
