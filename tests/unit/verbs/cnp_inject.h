#pragma once
// CNPs sent to a soft NIC from a UDP socket of the test's own, to drive a QP's DCQCN reaction
// point without congestion: the NIC verifies and handles them as it would a peer's.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "fake_peer.h"
#include "rdmad/roce/packet.h"
#include "rdmad/verbs/device.h"

namespace rdmad::verbs::test {

// Sends `n` CNPs for `dest_qp` to the soft NIC behind `to`.
inline void send_cnps(const PortInfo& to, uint32_t dest_qp, int n) {
  FakePeer self;
  for (int i = 0; i < n; ++i) ASSERT_TRUE(self.send(roce::make_cnp(dest_qp), to.udp_port));
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
