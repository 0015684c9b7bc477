#pragma once
// CNPs sent to a soft NIC from a UDP socket of the test's own, to drive a QP's DCQCN reaction
// point without congestion: the NIC verifies and handles them as it would a peer's (the socket
// passes for the peer: its address and a RoCEv2 source port).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "fake_peer.h"
#include "verbs_test_util.h"
#include "rdmad/roce/packet.h"
#include "rdmad/verbs/device.h"

namespace rdmad::verbs::test {

// A soft NIC whose QPs a single CNP holds at `mbps` for good: DCQCN on, the first CNP sets the
// current and the target rate to `mbps` (rate_to_set_on_first_cnp), and neither the timer nor the
// byte counter ever raises them again (both off: no increase events at all).
inline DeviceConfig held_rate_config(uint32_t mbps) {
  DeviceConfig c = soft_config();
  c.backend_options["cc_enabled"] = true;
  c.backend_options["line_rate_mbps"] = 10'000;
  c.dcqcn = cc::mlx5_profile();
  c.dcqcn.rate_on_first_cnp_mbps = mbps;
  c.dcqcn.increase_timer_us = 0;
  c.dcqcn.byte_counter_bytes = 0;
  return c;
}

// Sends `n` CNPs for `dest_qp` to the soft NIC behind `to`, from 127.0.0.1 and a RoCEv2 source
// port: the NIC takes CNPs only from the peer of the QP they name, and the tests' peers are soft
// NICs on 127.0.0.1, which send from that range.
inline void send_cnps(const PortInfo& to, uint32_t dest_qp, int n) {
  FakePeer self(FakePeer::kRoceSourcePorts);
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
