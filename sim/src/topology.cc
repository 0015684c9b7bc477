#include "rdmad/sim/topology.h"

#include <fmt/format.h>

namespace rdmad::sim {
namespace {

uint32_t add_switch(Topology& t, std::string name) {
  t.switch_names.push_back(std::move(name));
  return t.hosts + t.switches++;
}

void link(Topology& t, uint32_t a, uint32_t b, double gbps, int64_t delay_ns) {
  t.links.push_back({a, b, gbps, delay_ns});
}

Topology star(const TopologyConfig& c) {
  Topology t;
  t.hosts = c.senders + 1;
  uint32_t sw = add_switch(t, "sw0");
  for (uint32_t h = 0; h < t.hosts; ++h) link(t, h, sw, c.host_link_gbps, c.link_delay_ns);
  for (uint32_t h = 0; h < c.senders; ++h) t.senders.push_back(h);
  t.receivers.push_back(c.senders);
  t.bottlenecks.emplace_back(sw, c.senders);
  return t;
}

Topology dumbbell(const TopologyConfig& c) {
  Topology t;
  t.hosts = 2 * c.senders;
  uint32_t left = add_switch(t, "left");
  uint32_t right = add_switch(t, "right");
  for (uint32_t h = 0; h < c.senders; ++h) {
    link(t, h, left, c.host_link_gbps, c.link_delay_ns);
    link(t, c.senders + h, right, c.host_link_gbps, c.link_delay_ns);
    t.senders.push_back(h);
    t.receivers.push_back(c.senders + h);
  }
  link(t, left, right, c.fabric_link_gbps, c.link_delay_ns);
  t.bottlenecks.emplace_back(left, right);
  return t;
}

Topology leaf_spine(const TopologyConfig& c) {
  Topology t;
  t.hosts = c.leaves * c.hosts_per_leaf;
  std::vector<uint32_t> leaves;
  std::vector<uint32_t> spines;
  for (uint32_t l = 0; l < c.leaves; ++l) leaves.push_back(add_switch(t, fmt::format("leaf{}", l)));
  for (uint32_t s = 0; s < c.spines; ++s) spines.push_back(add_switch(t, fmt::format("spine{}", s)));
  for (uint32_t h = 0; h < t.hosts; ++h) {
    uint32_t leaf = leaves[h / c.hosts_per_leaf];
    link(t, h, leaf, c.host_link_gbps, c.link_delay_ns);
    t.bottlenecks.emplace_back(leaf, h);
  }
  for (uint32_t l : leaves) {
    for (uint32_t s : spines) link(t, l, s, c.fabric_link_gbps, c.link_delay_ns);
  }
  return t;
}

Topology fat_tree(const TopologyConfig& c) {
  Topology t;
  const uint32_t k = c.fat_tree_k;
  const uint32_t half = k / 2;
  t.hosts = k * k * k / 4;
  std::vector<uint32_t> cores;
  for (uint32_t i = 0; i < half * half; ++i) cores.push_back(add_switch(t, fmt::format("core{}", i)));
  for (uint32_t pod = 0; pod < k; ++pod) {
    std::vector<uint32_t> edges;
    std::vector<uint32_t> aggs;
    for (uint32_t i = 0; i < half; ++i) edges.push_back(add_switch(t, fmt::format("edge{}_{}", pod, i)));
    for (uint32_t i = 0; i < half; ++i) aggs.push_back(add_switch(t, fmt::format("agg{}_{}", pod, i)));
    for (uint32_t e = 0; e < half; ++e) {
      for (uint32_t i = 0; i < half; ++i) {
        uint32_t host = pod * half * half + e * half + i;
        link(t, host, edges[e], c.host_link_gbps, c.link_delay_ns);
        t.bottlenecks.emplace_back(edges[e], host);
      }
      for (uint32_t a : aggs) link(t, edges[e], a, c.fabric_link_gbps, c.link_delay_ns);
    }
    // Aggregation switch i of every pod connects to cores i·k/2 … i·k/2 + k/2 − 1.
    for (uint32_t i = 0; i < half; ++i) {
      for (uint32_t j = 0; j < half; ++j)
        link(t, aggs[i], cores[i * half + j], c.fabric_link_gbps, c.link_delay_ns);
    }
  }
  return t;
}

}  // namespace

Topology build_topology(const TopologyConfig& cfg) {
  switch (cfg.kind) {
    case TopologyKind::kStar:
      return star(cfg);
    case TopologyKind::kDumbbell:
      return dumbbell(cfg);
    case TopologyKind::kLeafSpine:
      return leaf_spine(cfg);
    case TopologyKind::kFatTree:
      return fat_tree(cfg);
  }
  return {};
}

}  // namespace rdmad::sim
