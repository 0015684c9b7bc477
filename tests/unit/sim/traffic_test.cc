#include "rdmad/sim/traffic.h"

#include <gtest/gtest.h>

#include <algorithm>

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

Scenario sources(const std::string& topology, const std::string& traffic) {
  return parse_scenario(topology + traffic, std::filesystem::path(RDMAD_SOURCE_DIR) / "sim" / "workloads", {},
                        "t.toml");
}

TEST(TrafficTest, FlowsPairUpAndStagger) {
  const Scenario s = sources("[topology]\nsenders = 4\n",
                             "[[traffic.source]]\nkind = \"flows\"\nsrc = \"host0..host2\"\ndst = \"host4\"\n"
                             "size_bytes = 10\nstart_us = 1\nstagger_us = 2\n"
                             "[[traffic.source]]\nkind = \"flows\"\nsrc = [\"host0\", \"host1\"]\n"
                             "dst = [\"host3\", \"host2\"]\n");
  const Traffic t = make_traffic(s, build_topology(s.topology));
  ASSERT_EQ(t.flows.size(), 5u);
  // Sorted by start: the second source's two (at 0) first.
  EXPECT_EQ(t.flows[0].dst, 3u);
  EXPECT_EQ(t.flows[1].dst, 2u);
  EXPECT_EQ(t.flows[1].size_bytes, 0u);
  EXPECT_EQ(t.flows[4].src, 2u);
  EXPECT_EQ(t.flows[4].start_ns, 5000);
  EXPECT_TRUE(t.after.empty());
  EXPECT_TRUE(t.jain_windows);
}

TEST(TrafficTest, IncastAtGivenTimesFromEveryOtherHost) {
  const Scenario s =
      sources("[topology]\nsenders = 4\n",
              "[[traffic.source]]\nkind = \"incast\"\ndst = \"host1\"\nsize_bytes = 7\n"
              "at_us = [30, 10]\n[[traffic.source]]\nkind = \"incast\"\ndst = \"host0\"\n"
              "src = \"host3\"\nsize_bytes = 1\nstart_us = 5\nbursts = 2\nburst_interval_us = 100\n");
  const Traffic t = make_traffic(s, build_topology(s.topology));
  ASSERT_EQ(t.flows.size(), 2u * 4 + 2);
  EXPECT_EQ(t.incast_flows.size(), t.flows.size());
  EXPECT_EQ(t.flows[0].start_ns, 5000);
  for (int i = 1; i <= 4; ++i) {
    EXPECT_EQ(t.flows[i].start_ns, 10000);
    EXPECT_EQ(t.flows[i].dst, 1u);
    EXPECT_NE(t.flows[i].src, 1u);
  }
  EXPECT_EQ(t.flows.back().start_ns, 105000);
  EXPECT_FALSE(t.jain_windows);  // no long flows
}

TEST(TrafficTest, PoissonAmongMultiNicHostsNeverStaysOnOneHost) {
  const Scenario s = sources("[topology]\nkind = \"rail\"\nhosts = 3\nrails = 4\n",
                             "[[traffic.source]]\nkind = \"poisson\"\ncdf = \"websearch.cdf\"\nload = 0.5\n"
                             "flow_count = 2000\n");
  const Topology topo = build_topology(s.topology);
  const Traffic t = make_traffic(s, topo);
  ASSERT_EQ(t.flows.size(), 2000u);
  std::vector<int> from(topo.hosts, 0);
  for (const FlowSpec& f : t.flows) {
    ASSERT_NE(topo.machine_of[f.src], topo.machine_of[f.dst]);
    ++from[f.src];
  }
  for (uint32_t n = 0; n < topo.hosts; ++n) EXPECT_GT(from[n], 100) << n;  // every NIC sends (≈ 167 each)
}

TEST(TrafficTest, PoissonIntoNamedHostsLoadsTheirLinks) {
  // Three senders into one receiver at 60% of the receiver's 100 Gb/s link (a fan-in: each sender
  // offers a fifth of its own).
  const Scenario s = sources("[topology]\nkind = \"star\"\nsenders = 3\n",
                             "[[traffic.source]]\nkind = \"poisson\"\ndst = \"host3\"\ncdf = \"websearch.cdf\"\n"
                             "load = 0.6\nflow_count = 100000\n");
  const Topology topo = build_topology(s.topology);
  const auto flows = generate_traffic(s, topo);
  ASSERT_EQ(flows.size(), 100000u);
  std::vector<int> from(topo.hosts, 0);
  double bytes = 0;
  for (const FlowSpec& f : flows) {
    ASSERT_EQ(f.dst, 3u);
    ++from[f.src];
    bytes += static_cast<double>(f.size_bytes);
  }
  EXPECT_EQ(from[3], 0);
  for (uint32_t n = 0; n < 3; ++n) EXPECT_NEAR(from[n], 33333, 800) << n;
  const double span_ns = static_cast<double>(flows.back().start_ns - flows.front().start_ns);
  EXPECT_NEAR(bytes * 8 / span_ns / 100, 0.6, 0.03);
  // Every host a destination leaves no sender.
  EXPECT_THROW(generate_traffic(sources("[topology]\nkind = \"star\"\nsenders = 1\n",
                                        "[[traffic.source]]\nkind = \"poisson\"\nhosts = \"host0..host1\"\n"
                                        "dst = \"host0..host1\"\ncdf = \"websearch.cdf\"\nload = 0.5\nflow_count = 3\n"),
                                topo),
               std::runtime_error);
}

TEST(TrafficTest, TheSingleSourceAndAPoissonSourceGiveTheSameFlows) {
  // Source 0 draws from the seed itself, as [traffic] did: the same arrivals, hosts and sizes.
  const std::string topology = "[topology]\nkind = \"leafspine\"\nleaves = 2\nhosts_per_leaf = 4\n";
  const Scenario one = sources(topology,
                               "[traffic]\nkind = \"poisson\"\ncdf = \"fb_hadoop.cdf\"\nload = 0.4\n"
                               "flow_count = 500\n");
  const Scenario listed = sources(topology,
                                  "[[traffic.source]]\nkind = \"poisson\"\ncdf = \"fb_hadoop.cdf\"\n"
                                  "load = 0.4\nflow_count = 500\n");
  const auto a = generate_traffic(one, build_topology(one.topology));
  const auto b = generate_traffic(listed, build_topology(listed.topology));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].start_ns, b[i].start_ns);
    ASSERT_EQ(a[i].src, b[i].src);
    ASSERT_EQ(a[i].dst, b[i].dst);
    ASSERT_EQ(a[i].size_bytes, b[i].size_bytes);
  }
}

TEST(TrafficTest, RingPhasesWaitForTheFlowIntoTheirSender) {
  const Scenario s = sources("[topology]\nkind = \"rail\"\nhosts = 3\nrails = 2\n",
                             "[[traffic.source]]\nkind = \"allreduce\"\nsize_bytes = 600\n");
  const Topology topo = build_topology(s.topology);
  const Traffic t = make_traffic(s, topo);
  ASSERT_EQ(t.collectives.size(), 1u);
  const CollectiveSpec& c = t.collectives[0];
  EXPECT_EQ(c.rails, 2u);
  ASSERT_EQ(c.phases.size(), 4u);  // 2(N−1)
  ASSERT_EQ(t.after.size(), t.flows.size());
  for (size_t p = 0; p < 4; ++p) {
    ASSERT_EQ(c.phases[p].size(), 6u);  // N ranks × 2 rails
    for (uint32_t f : c.phases[p]) {
      const FlowSpec& flow = t.flows[f];
      EXPECT_EQ(flow.size_bytes, 100u);    // 600 / 2 rails / 3 ranks
      const uint32_t rail = flow.src % 2;  // NIC k of host h is node 2h + k
      EXPECT_EQ(flow.dst % 2, rail);
      EXPECT_EQ(topo.machine_of[flow.dst], (topo.machine_of[flow.src] + 1) % 3);
      if (p == 0) {
        EXPECT_EQ(t.after[f], kNoFlow);
      } else {
        // It waits for the flow that brought phase p−1 to its sender, on its rail.
        ASSERT_NE(t.after[f], kNoFlow);
        EXPECT_EQ(t.flows[t.after[f]].dst, flow.src);
        EXPECT_NE(std::find(c.phases[p - 1].begin(), c.phases[p - 1].end(), t.after[f]),
                  c.phases[p - 1].end());
      }
    }
  }
}

}  // namespace
}  // namespace rdmad::sim
