#pragma once
// CNPs sent to a soft NIC from a UDP socket of the test's own, to drive a QP's DCQCN reaction
// point without congestion: the NIC verifies and handles them as it would a peer's.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "rdmad/roce/packet.h"
#include "rdmad/verbs/device.h"
#include "udp_peer.h"

namespace rdmad::verbs::test {

// Sends `n` CNPs for `dest_qp` to a soft NIC from a UDP socket of our own (the ICRC covers the
// socket's real addresses, so the NIC verifies it as it would a peer's).
inline void send_cnps(const PortInfo& to, uint32_t dest_qp, int n) {
  UdpPeer self;
  ASSERT_TRUE(self.ok());
  roce::IpUdpInfo ip;
  ip.src = ip.dst = roce::IpAddr::v4(INADDR_LOOPBACK);
  ip.src_port = self.port();
  ip.dst_port = to.udp_port;
  uint8_t buf[64];
  const size_t bytes = roce::encode_datagram(ip, roce::make_cnp(dest_qp), buf);
  ASSERT_GT(bytes, 0u);
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  dst.sin_port = htons(to.udp_port);
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(sendto(self.fd(), buf, bytes, 0, reinterpret_cast<sockaddr*>(&dst), sizeof dst),
              static_cast<ssize_t>(bytes));
  }
}

inline bool wait_cnps_handled(const Device& dev, uint64_t n) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (dev.counters().rp_cnp_handled < n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace rdmad::verbs::test
