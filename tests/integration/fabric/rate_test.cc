// A port drains at its configured rate: a burst queued in the port leaves at the rate within ±10%,
// measured at the receiver from the arrival times (datagram + 28 bytes of IPv4/UDP header).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>

#include "fabric_test_util.h"

namespace rdmad::fabric {
namespace {

using test::UdpPeer;

struct RateCase {
  const char* rate;
  size_t datagram_bytes;
  size_t count;
};

struct Measurement {
  double bps = -1;    // negative when the burst did not make it into the port intact
  uint64_t late = 0;  // departures the port thread sent over 1 ms behind schedule
};

// Sends a burst through a fresh port and measures the drain rate at the receiver.
Measurement measure(const RateCase& rc, uint64_t rate_bps) {
  UdpPeer receiver;
  UdpPeer sender;
  PortConfig p = test::port_to(receiver);
  p.rate_bps = rate_bps;
  p.buffer_bytes = 16ull << 20;  // the whole burst fits: only the drain rate shapes the output
  p.ecn = false;
  auto fabric = test::start_fabric(p);
  const Endpoint port = fabric->listen_endpoint(0);

  std::vector<test::Datagram> got;
  std::thread rx([&] { got = receiver.receive_all(rc.count, std::chrono::seconds(2)); });
  for (size_t i = 0; i < rc.count; ++i) sender.send(port, test::numbered(i, rc.datagram_bytes), 0);
  rx.join();

  const PortStats s = test::wait_for_stats(
      *fabric, [](const PortStats& st) { return st.queue_packets == 0 && st.tx_packets == st.rx_packets; });
  EXPECT_EQ(s.drops_buffer, 0u);
  if (s.rx_packets != rc.count || got.size() < rc.count / 2) return {-1, s.late_departures};
  EXPECT_GT(s.queue_peak_bytes, rc.datagram_bytes * rc.count / 10) << "the burst must have queued";
  // From the datagram a quarter into the burst (the sender is done by then and the queue is still
  // long) to the last, by kernel arrival timestamps. Sequence numbers count what the port sent in
  // between, so a datagram the receiving socket missed does not skew the rate.
  const test::Datagram& from = got[got.size() / 4];
  const test::Datagram& to = got.back();
  const uint64_t sent_between = test::seq_of(to.data) - test::seq_of(from.data);
  const double seconds = static_cast<double>(to.kernel_ns - from.kernel_ns) * 1e-9;
  return {static_cast<double>(sent_between * (rc.datagram_bytes + 28) * 8) / seconds, s.late_departures};
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

class FabricRate : public ::testing::TestWithParam<RateCase> {};

TEST_P(FabricRate, DrainsWithinTenPercent) {
  if constexpr (kSanitized)
    GTEST_SKIP() << "sanitizers slow every datagram several-fold: rate accuracy is not meaningful";
  const RateCase rc = GetParam();
  const uint64_t rate_bps = parse_rate_bps(rc.rate);
  // The pacing is exact in virtual time: a port thread that wakes late sends what became due at
  // once, so the rate holds even when it is preempted, unless other processes starve it for long.
  // Up to three bursts are tried and one must come within 10%. A miss only counts as a failure
  // if the port kept to its schedule (no departure over 1 ms late); when every burst was starved
  // the test skips and says so.
  std::string tries;
  bool on_schedule_miss = false;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const Measurement m = measure(rc, rate_bps);
    tries += " " + std::to_string(m.bps / 1e6) + " (late " + std::to_string(m.late) + ")";
    if (m.bps > 0 && std::abs(m.bps / static_cast<double>(rate_bps) - 1.0) <= 0.10) {
      RecordProperty("measured_mbps", tries);
      return;
    }
    on_schedule_miss |= m.bps > 0 && m.late == 0;
  }
  if (!on_schedule_miss) GTEST_SKIP() << "the port thread was starved of CPU in every burst; Mb/s:" << tries;
  ADD_FAILURE() << "port " << rc.rate << ", measured Mb/s:" << tries;
}

INSTANTIATE_TEST_SUITE_P(Rates, FabricRate,
                         // 1 Gb/s of 1 KB datagrams is ~120k datagrams/s through three threads
                         // (sender, port, receiver): more than two busy cores sustain, so 1 Gb/s is
                         // checked with 4 KB datagrams (RoCEv2 at a 4096 path MTU).
                         ::testing::Values(RateCase{"1gbit", 4096, 3000}, RateCase{"100mbit", 1024, 1000}),
                         [](const auto& i) {
                           return std::string(i.param.rate) + "_" + std::to_string(i.param.datagram_bytes);
                         });

}  // namespace
}  // namespace rdmad::fabric
