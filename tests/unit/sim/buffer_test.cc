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

TEST(SimBuffers, StaticXonMustBeBelowXoff) {
  try {
    parse_scenario("[switch]\npfc_xoff_bytes = 1000\npfc_xon_bytes = 1000\n", "/", {}, "y.toml");
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("y.toml:3: key 'switch.pfc_xon_bytes' (1000) must be below"));
  }
}

}  // namespace
}  // namespace rdmad::sim
