#pragma once
// A plain UDP socket on 127.0.0.1 standing in for a soft NIC's peer: it sees what the NIC puts on
// the wire (decoded, ICRC verified against the real source) and sends it packets a test crafts
// (with the ICRC over its own real addresses, so the NIC verifies them as it would a peer's).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "rdmad/roce/packet.h"
#include "rdmad/verbs/device.h"

namespace rdmad::verbs::test {

struct FakePeer {
  int fd = -1;
  uint16_t port = 0;
  FakePeer() {
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    socklen_t len = sizeof sa;
    getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    port = ntohs(sa.sin_port);
  }
  ~FakePeer() { close(fd); }
  FakePeer(const FakePeer&) = delete;
  FakePeer& operator=(const FakePeer&) = delete;

  /// Next datagram (ICRC verified against its real source) decoded into `pkt`, or false by the
  /// deadline. `from` receives the sender's address.
  bool receive(roce::Packet* pkt, sockaddr_in* from, uint8_t* buf, size_t cap,
               std::chrono::steady_clock::time_point deadline) {
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 10) <= 0) continue;
      socklen_t len = sizeof *from;
      ssize_t n = recvfrom(fd, buf, cap, 0, reinterpret_cast<sockaddr*>(from), &len);
      if (n <= 0) continue;
      roce::IpUdpInfo ip;
      ip.src = roce::IpAddr::v4(ntohl(from->sin_addr.s_addr));
      ip.dst = ip.src;
      ip.src_port = ntohs(from->sin_port);
      ip.dst_port = port;
      EXPECT_EQ(roce::decode_datagram({buf, static_cast<size_t>(n)}, &ip, pkt), roce::DecodeError::kOk)
          << "ICRC over the real source port";
      return true;
    }
    return false;
  }

  /// Sends `pkt` to the loopback UDP port `to_port`; false if it cannot be encoded or sent.
  bool send(const roce::Packet& pkt, uint16_t to_port) const {
    roce::IpUdpInfo ip;
    ip.src = roce::IpAddr::v4(0x7F000001);
    ip.dst = ip.src;
    ip.src_port = port;
    ip.dst_port = to_port;
    uint8_t out[4200];
    const size_t n = roce::encode_datagram(ip, pkt, out);
    if (n == 0) return false;
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(to_port);
    return sendto(fd, out, n, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) == static_cast<ssize_t>(n);
  }
};

/// The peer as a QP's remote port (loopback GID, its UDP port).
inline PortInfo port_of(const FakePeer& peer) {
  PortInfo p;
  p.gid = Gid::from_ip("127.0.0.1").value();
  p.udp_port = peer.port;
  return p;
}

}  // namespace rdmad::verbs::test
