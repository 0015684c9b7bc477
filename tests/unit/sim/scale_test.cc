// The shipped scale scenarios (issue 25, item 5): rail1024_allreduce (128 hosts × 8 rails, a 64 MB
// ring AllReduce) and fattree1024_websearch_1m (k = 16 fat-tree, 1,000,000 WebSearch flows) take
// seconds to minutes (BENCHMARKS.md, sim). Here they parse at full size and run to completion
// scaled down (16 hosts; a 1 MB AllReduce, 1,000 flows).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "rdmad/sim/scenario.h"
#include "scenario_helpers.h"

namespace rdmad::sim {
namespace {

const std::filesystem::path kScenarios = std::filesystem::path(RDMAD_SOURCE_DIR) / "sim" / "scenarios";

Scenario load(const std::string& name, bool scaled) {
  std::vector<std::string> o = {"sim.progress=false"};
  if (scaled) {
    const auto down = testing::scaled_down(name);
    o.insert(o.end(), down.begin(), down.end());
  }
  return load_scenario(kScenarios / (name + ".toml"), o);
}

TEST(SimScale, ShippedScaleScenariosParseAtFullSize) {
  const Scenario rail = load("rail1024_allreduce", false);
  EXPECT_EQ(rail.topology.hosts * rail.topology.rails, 1024u);
  ASSERT_EQ(rail.traffic.sources.size(), 1u);
  EXPECT_EQ(rail.traffic.sources[0].size_bytes, 64'000'000u);

  const Scenario ft = load("fattree1024_websearch_1m", false);
  EXPECT_EQ(ft.topology.fat_tree_k, 16u);  // k³/4 = 1,024 hosts
  EXPECT_EQ(ft.traffic.kind, TrafficKind::kPoisson);
  EXPECT_EQ(ft.traffic.flow_count, 1'000'000u);
  EXPECT_TRUE(std::filesystem::exists(ft.traffic.cdf));
}

TEST(SimScale, RailAllReduceScaledDownCompletes) {
  // 16 hosts × 8 rails: 2(N−1) = 30 phases on each rail, 16 · 8 · 30 = 3,840 flows.
  const RunResults r = testing::run_scenario(load("rail1024_allreduce", true));
  ASSERT_EQ(r.collectives.size(), 1u);
  EXPECT_EQ(r.collectives[0].flows, 3840u);
  EXPECT_EQ(r.collectives[0].flows_completed, 3840u);
  EXPECT_GT(r.collectives[0].completion_us, 0);
  EXPECT_EQ(r.drops, 0u);
}

TEST(SimScale, FatTreeWebSearchScaledDownCompletes) {
  const RunResults r = testing::run_scenario(load("fattree1024_websearch_1m", true));
  EXPECT_EQ(r.flows_total, 1000u);
  EXPECT_EQ(r.flows_completed, 1000u);
  EXPECT_EQ(r.drops, 0u);
  EXPECT_GT(r.packet_hops, 0u);
}

}  // namespace
}  // namespace rdmad::sim
