#include "rdmad/sim/topology.h"

#include <gtest/gtest.h>

namespace rdmad::sim {
namespace {

TEST(TopologyTest, StarHasSendersAndOneReceiver) {
  TopologyConfig c;
  c.kind = TopologyKind::kStar;
  c.senders = 5;
  Topology t = build_topology(c);
  EXPECT_EQ(t.hosts, 6u);
  EXPECT_EQ(t.switches, 1u);
  EXPECT_EQ(t.links.size(), 6u);
  EXPECT_EQ(t.receivers, std::vector<uint32_t>{5});
  ASSERT_EQ(t.bottlenecks.size(), 1u);
  EXPECT_EQ(t.bottlenecks[0], std::make_pair(6u, 5u));  // switch → receiver
}

TEST(TopologyTest, DumbbellSharesOneFabricLink) {
  TopologyConfig c;
  c.kind = TopologyKind::kDumbbell;
  c.senders = 3;
  c.fabric_link_gbps = 40;
  Topology t = build_topology(c);
  EXPECT_EQ(t.hosts, 6u);
  EXPECT_EQ(t.switches, 2u);
  EXPECT_EQ(t.links.size(), 7u);
  EXPECT_EQ(t.links.back().gbps, 40);
  EXPECT_EQ(t.receivers, (std::vector<uint32_t>{3, 4, 5}));
}

TEST(TopologyTest, LeafSpineIsFullBipartite) {
  TopologyConfig c;
  c.kind = TopologyKind::kLeafSpine;
  c.leaves = 4;
  c.spines = 3;
  c.hosts_per_leaf = 5;
  Topology t = build_topology(c);
  EXPECT_EQ(t.hosts, 20u);
  EXPECT_EQ(t.switches, 7u);
  EXPECT_EQ(t.links.size(), 20u + 4 * 3);
  EXPECT_EQ(t.bottlenecks.size(), 20u);
}

TEST(TopologyTest, FatTreeHasTheTextbookCounts) {
  for (uint32_t k : {2u, 4u, 8u}) {
    TopologyConfig c;
    c.kind = TopologyKind::kFatTree;
    c.fat_tree_k = k;
    Topology t = build_topology(c);
    EXPECT_EQ(t.hosts, k * k * k / 4);
    EXPECT_EQ(t.switches, 5 * k * k / 4);
    EXPECT_EQ(t.links.size(), 3 * k * k * k / 4);  // host, edge–agg and agg–core layers
    std::vector<int> degree(t.nodes(), 0);
    for (const auto& l : t.links) {
      ++degree[l.a];
      ++degree[l.b];
    }
    for (uint32_t n = t.hosts; n < t.nodes(); ++n)
      EXPECT_EQ(degree[n], static_cast<int>(k)) << t.switch_names[n - t.hosts];
  }
}

}  // namespace
}  // namespace rdmad::sim
