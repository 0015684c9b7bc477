#include "rdmad/sim/topology.h"

#include <gtest/gtest.h>

#include <stdexcept>

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

TEST(TopologyTest, RailOptimisedHostsHaveANicOnEachRailsLeaf) {
  TopologyConfig c;
  c.kind = TopologyKind::kRail;
  c.hosts = 16;
  c.rails = 4;
  c.spines = 2;
  Topology t = build_topology(c);
  EXPECT_EQ(t.hosts, 64u);  // NICs
  EXPECT_EQ(t.machines.size(), 16u);
  EXPECT_EQ(t.switches, 4u + 2);
  EXPECT_EQ(t.links.size(), 64u + 4 * 2);
  EXPECT_EQ(t.bottlenecks.size(), 64u);
  for (uint32_t h = 0; h < 16; ++h) {
    const Machine& m = t.machines[h];
    EXPECT_EQ(m.name, "host" + std::to_string(h));
    ASSERT_EQ(m.nics.size(), 4u);
    for (uint32_t k = 0; k < 4; ++k) {
      const uint32_t nic = m.nics[k];
      EXPECT_EQ(t.host_names[nic], "host" + std::to_string(h) + ".nic" + std::to_string(k));
      EXPECT_EQ(t.machine_of[nic], h);
      // Its one link goes to leaf k.
      int links = 0;
      for (const LinkSpec& l : t.links) {
        if (l.a != nic && l.b != nic) continue;
        ++links;
        EXPECT_EQ(t.node_name(l.a == nic ? l.b : l.a), "leaf" + std::to_string(k));
      }
      EXPECT_EQ(links, 1);
    }
  }
  // Every leaf to every spine, at the fabric rate.
  for (size_t i = 64; i < t.links.size(); ++i) {
    EXPECT_EQ(t.node_name(t.links[i].a).rfind("leaf", 0), 0u);
    EXPECT_EQ(t.node_name(t.links[i].b).rfind("spine", 0), 0u);
  }
}

TEST(TopologyTest, RailLeavesSplitTheHostsOfARail) {
  TopologyConfig c;
  c.kind = TopologyKind::kRail;
  c.hosts = 5;
  c.rails = 2;
  c.leaves_per_rail = 2;  // hosts 0-2 on leafK_0, 3-4 on leafK_1
  c.spines = 1;
  Topology t = build_topology(c);
  EXPECT_EQ(t.node_name(t.links[2 * 2 + 1].b), "leaf1_0");  // host2.nic1
  EXPECT_EQ(t.node_name(t.links[2 * 3 + 0].b), "leaf0_1");  // host3.nic0
  EXPECT_EQ(t.links.size(), 10u + 4);
}

TEST(TopologyTest, GeneratedNamesAndRanges) {
  TopologyConfig c;
  c.kind = TopologyKind::kLeafSpine;
  c.leaves = 2;
  c.hosts_per_leaf = 2;
  c.spines = 1;
  Topology t = build_topology(c);
  EXPECT_EQ(t.find_node("host3"), 3u);
  EXPECT_EQ(t.find_node("spine0"), 6u);
  EXPECT_FALSE(t.find_node("host4"));
  EXPECT_EQ(expand_range("host2..host4"), (std::vector<std::string>{"host2", "host3", "host4"}));
  EXPECT_EQ(expand_range("h1.nic0..h1.nic1"), (std::vector<std::string>{"h1.nic0", "h1.nic1"}));
  EXPECT_EQ(expand_range("sw"), std::vector<std::string>{"sw"});
  EXPECT_THROW(expand_range("host4..host2"), std::invalid_argument);
  EXPECT_THROW(expand_range("host1..leaf3"), std::invalid_argument);
}

}  // namespace
}  // namespace rdmad::sim
