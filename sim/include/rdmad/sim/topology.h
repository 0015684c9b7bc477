#pragma once
// Topology builders. Nodes 0..hosts-1 are hosts (one NIC port each), the rest are switches. Every
// link is full duplex with one rate and one propagation delay.
#include <cstdint>
#include <string>
#include <vector>

#include "rdmad/sim/scenario.h"

namespace rdmad::sim {

struct LinkSpec {
  uint32_t a;
  uint32_t b;
  double gbps;
  int64_t delay_ns;
};

struct Topology {
  uint32_t hosts = 0;
  uint32_t switches = 0;
  std::vector<LinkSpec> links;
  std::vector<std::string> switch_names;  // "leaf3", "spine0", "core1", ...
  // Directed links (from, to) whose egress queues are "the bottleneck" for summary metrics.
  std::vector<std::pair<uint32_t, uint32_t>> bottlenecks;
  std::vector<uint32_t> senders;    // star / dumbbell
  std::vector<uint32_t> receivers;  // star: one; dumbbell: one per sender
  uint32_t nodes() const { return hosts + switches; }
};

// Builds the topology a scenario names. Star: senders + 1 receiver on one switch. Dumbbell: senders on
// a left switch, as many receivers on a right switch, one fabric link between them. Leaf-spine:
// every leaf linked to every spine. Fat-tree: k pods of k/2 edge and k/2 aggregation switches,
// (k/2)^2 cores, k^3/4 hosts.
Topology build_topology(const TopologyConfig& cfg);

}  // namespace rdmad::sim
