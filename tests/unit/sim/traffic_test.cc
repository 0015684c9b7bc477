#include "rdmad/sim/traffic.h"

#include <gtest/gtest.h>

namespace rdmad::sim {
namespace {

Scenario poisson(double load, uint32_t count) {
  return parse_scenario(
      "[topology]\nkind=\"leafspine\"\nleaves=4\nhosts_per_leaf=8\n[traffic]\nkind=\"poisson\"\ncdf="
      "\"websearch.cdf\"\n",
      std::filesystem::path(RDMAD_SOURCE_DIR) / "sim" / "workloads",
      {"traffic.load=" + std::to_string(load), "traffic.flow_count=" + std::to_string(count)});
}

TEST(TrafficTest, PoissonOffersTheTargetLoad) {
  Scenario s = poisson(0.3, 200000);
  Topology t = build_topology(s.topology);
  auto flows = generate_traffic(s, t);
  ASSERT_EQ(flows.size(), 200000u);
  double bytes = 0;
  for (const auto& f : flows) {
    EXPECT_NE(f.src, f.dst);
    ASSERT_LT(f.dst, t.hosts);
    bytes += static_cast<double>(f.size_bytes);
  }
  double span_ns = static_cast<double>(flows.back().start_ns - flows.front().start_ns);
  double offered = bytes * 8 / span_ns / (t.hosts * s.topology.host_link_gbps);
  EXPECT_NEAR(offered, 0.3, 0.015);
}

TEST(TrafficTest, SameSeedSameFlowsOtherSeedOtherFlows) {
  Scenario s = poisson(0.5, 1000);
  Topology t = build_topology(s.topology);
  auto a = generate_traffic(s, t);
  auto b = generate_traffic(s, t);
  s.seed = 2;
  auto c = generate_traffic(s, t);
  ASSERT_EQ(a.size(), b.size());
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].start_ns, b[i].start_ns);
    EXPECT_EQ(a[i].size_bytes, b[i].size_bytes);
    EXPECT_EQ(a[i].dst, b[i].dst);
    differs = differs || a[i].size_bytes != c[i].size_bytes;
  }
  EXPECT_TRUE(differs);
}

TEST(TrafficTest, LongFlowsStaggerAndIncastRepeats) {
  Scenario s = parse_scenario("[topology]\nsenders=3\n[traffic]\nkind=\"long\"\nstagger_us=5\n", "/");
  auto flows = generate_traffic(s, build_topology(s.topology));
  ASSERT_EQ(flows.size(), 3u);
  EXPECT_EQ(flows[2].start_ns, 10000);
  EXPECT_EQ(flows[2].dst, 3u);
  s = parse_scenario(
      "[topology]\nsenders=3\n[traffic]\nkind=\"incast\"\nbursts=2\nburst_interval_us=7\nsize_bytes=9\n",
      "/");
  flows = generate_traffic(s, build_topology(s.topology));
  ASSERT_EQ(flows.size(), 6u);
  EXPECT_EQ(flows[3].start_ns, 7000);
  EXPECT_EQ(flows[5].size_bytes, 9u);
}

}  // namespace
}  // namespace rdmad::sim
