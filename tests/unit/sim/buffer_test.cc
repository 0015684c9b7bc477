// Switch buffers: the automatic PFC headroom on long links, an explicit headroom that does not fit,
// and static Xoff/Xon thresholds (issue 25, "Buffers").
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "rdmad/sim/scenario.h"
#include "rdmad/sim/simulator.h"
#include "scenario_helpers.h"

namespace rdmad::sim {
namespace {

using ::testing::HasSubstr;
using testing::run_scenario;
using testing::star_long_flows;

std::string run_error(const Scenario& s) {
  try {
    run_scenario(s);
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

TEST(SimBuffers, LongLinksCapTheAutomaticHeadroomWithAWarning) {
  // 1 ms links at 100 Gb/s: 2·BDP = 25 MB of headroom per port, 5 ports > the 32 MiB buffer. This
  // used to refuse to start; now it runs, with the headroom capped to half the buffer and a
  // warning naming the key and the size lossless operation needs.
  const RunResults r = run_scenario(star_long_flows(
      4, {"topology.link_delay_ns=1000000", "sim.duration_ms=3", "sim.warmup_ms=0"}));
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0], HasSubstr("star: switch.buffer_bytes (33554432)"));
  // Per port 2·1 ms·100 Gb/s / 8 + 3·1062 = 25'003'186 B; 5 ports (4 senders, 1 receiver):
  // 125'015'930 B; capped to ⌊2^25/2⌋ = 16'777'216 less rounding down per port; needs twice the
  // headroom: 250'031'860.
  EXPECT_THAT(r.warnings[0], HasSubstr("(125015930 in all): capped to 16777215"));
  EXPECT_THAT(r.warnings[0], HasSubstr("lossless needs switch.buffer_bytes >= 250031860"));
  EXPECT_GT(r.flows_total, 0u);
}

TEST(SimBuffers, ExplicitHeadroomThatDoesNotFitNamesFileLineAndKey) {
  const Scenario s = parse_scenario("[switch]\nbuffer_bytes = 1000000\nheadroom_bytes = 300000\n"
                                    "[topology]\nkind = \"star\"\nsenders = 4\n",
                                    "/", {"sim.progress=false"}, "x.toml");
  const std::string e = run_error(s);
  EXPECT_THAT(e, HasSubstr("x.toml:3: key 'switch.headroom_bytes' (300000 per ingress port, 1500000 on switch"));
  EXPECT_THAT(e, HasSubstr("switch.buffer_bytes (1000000, x.toml:2): needs switch.buffer_bytes > 1500000"));
}

TEST(SimBuffers, StaticXoffPausesEarlierThanTheDynamicThreshold) {
  // 16 × 300 KB into one port. Dynamic: an ingress may hold 1/8 of the free 32 MiB (≈ 4 MB), more than
  // a flow ever queues, so nothing pauses. Static Xoff 20 KB: every ingress pauses, nothing drops.
  const std::vector<std::string> burst = {"traffic.kind=\"incast\"", "traffic.size_bytes=300000",
                                          "sim.duration_ms=3", "sim.warmup_ms=0", "cc.enabled=false"};
  const RunResults dynamic = run_scenario(star_long_flows(16, burst));
  auto with_static = burst;
  with_static.push_back("switch.pfc_xoff_bytes=20000");
  with_static.push_back("switch.pfc_xon_bytes=10000");
  const RunResults fixed = run_scenario(star_long_flows(16, with_static));
  EXPECT_EQ(dynamic.pfc_pauses, 0u);
  EXPECT_GE(fixed.pfc_pauses, 16u);
  EXPECT_EQ(fixed.drops, 0u);
  EXPECT_EQ(fixed.flows_completed, 16u);
}

// h0 —100 Gb/s— s —40 Gb/s— h1, 1 µs links, no DCQCN: one 40-packet flow (1062 B on the wire:
// 85 ns a packet at 100 Gb/s, 213 at 40). Packet i reaches s at T_i = 1085 + 85·i, and s sends
// packet j from E_j = 1085 + 213·j; before T_i it has sent D_i = ⌊(85·i − 1)/213⌋ + 1 of them, so
// the ingress holds i − D_i packets: 0, 1, 1, 2, 3, 3, 4, 4 for i = 1..8, and 5 at i = 9.
// With Xoff = 5 packets, packet 9 goes above it: PAUSE at T_9 = 1850, at h0 at 2850, after h0
// started packet 33 (at 2805); 34 packets in all. s resumes h0 when it holds Xon or less once
// they have arrived: 33 − j ≤ Xon after sending packet j, so at E_31 = 7688 for Xon = 2 packets and
// E_29 = 7262 for Xon = 4; RESUME at h0 1000 ns later. h0's last 6 packets, into an empty queue,
// then hold at most 4 before each arrives: no second PAUSE.
Scenario static_pfc(uint64_t xon_packets) {
  const std::string text = R"(
[sim]
duration_ms = 1
sample_interval_us = 1
[topology]
link_delay_ns = 1000
[[topology.node]]
name = "h"
count = 2
[[topology.node]]
name = "s"
kind = "switch"
[[topology.link]]
a = "h0"
b = "s"
gbps = 100
pfc_xoff_bytes = 5310
pfc_xon_bytes = )" + std::to_string(xon_packets * 1062) +
                           R"(
[[topology.link]]
a = "h1"
b = "s"
gbps = 40
[cc]
enabled = false
[[traffic.source]]
kind = "flows"
src = "h0"
dst = "h1"
size_bytes = 40000
)";
  return parse_scenario(text, "/", {"sim.progress=false"}, "pfc.toml");
}

TEST(SimBuffers, StaticXoffAndXonPauseAndResumeAtTheirThresholds) {
  const RunResults tight = run_scenario(static_pfc(2));
  EXPECT_EQ(tight.pfc_pauses, 1u);
  EXPECT_DOUBLE_EQ(tight.pfc_paused_ms, (8688 - 2850) / 1e6);
  EXPECT_EQ(tight.drops, 0u);
  EXPECT_EQ(tight.flows_completed, 1u);
  // The most the egress to h1 held: packets 14..33 when 33 arrived (13 left at E_13 = 3854).
  EXPECT_EQ(tight.queue_bytes.max, 20 * 1062);
  // The paused share of h0's port in the 1 µs samples: from 2.85 µs to 8.688 µs.
  for (const PortSeries& ps : tight.port_series) {
    if (ps.paused_ms == 0) continue;
    EXPECT_EQ(ps.port, "h0->s");
    EXPECT_DOUBLE_EQ(ps.paused[2], 0.15);
    EXPECT_DOUBLE_EQ(ps.paused[3], 1);
    EXPECT_DOUBLE_EQ(ps.paused[8], 0.688);
    EXPECT_DOUBLE_EQ(ps.paused[9], 0);
  }
  const RunResults loose = run_scenario(static_pfc(4));
  EXPECT_EQ(loose.pfc_pauses, 1u);
  EXPECT_DOUBLE_EQ(loose.pfc_paused_ms, (8262 - 2850) / 1e6);
}

TEST(SimBuffers, PerLinkHeadroomThatDoesNotFitNamesTheLink) {
  Scenario s = static_pfc(2);
  s.topology.links[0].headroom_bytes = 40'000'000;  // beyond the 32 MiB buffer
  EXPECT_THAT(run_error(s),
              HasSubstr("pfc.toml:13: key 'topology.link.headroom_bytes': switch s's explicit PFC headroom "
                        "(40000000 over its ports) does not fit in switch.buffer_bytes (33554432"));
}

TEST(SimBuffers, StaticXonMustBeBelowXoff) {
  try {
    parse_scenario("[switch]\npfc_xoff_bytes = 1000\npfc_xon_bytes = 1000\n", "/", {}, "y.toml");
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("y.toml:3: key 'switch.pfc_xon_bytes' (1000) must be below"));
  }
  Scenario s = static_pfc(2);
  s.topology.links[0].pfc_xon_bytes = 5310;
  EXPECT_EQ(run_error(s),
            "pfc.toml:13: key 'topology.link.pfc_xon_bytes' (5310) must be below the port's Xoff (5310)");
}

}  // namespace
}  // namespace rdmad::sim
