#pragma once
// Topology: a list of nodes and links, written out ([[topology.node]], [[topology.link]]) or made by
// a generator (star, dumbbell, leaf-spine, fat-tree, rail-optimised) and then amended by the lists.
// Nodes 0..hosts-1 are the NICs (one port each; a host with several NICs is a Machine), the rest are
// switches. Every link is full duplex with its own rate and propagation delay.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rdmad/sim/scenario.h"

namespace rdmad::sim {

struct LinkSpec {
  uint32_t a;
  uint32_t b;
  double gbps;
  int64_t delay_ns;
  // For the switch ingress port at either end: PFC headroom and static Xoff/Xon in bytes (0: the
  // [switch] settings).
  uint64_t headroom_bytes = 0;
  uint64_t pfc_xoff_bytes = 0;
  uint64_t pfc_xon_bytes = 0;
  std::string at;  // "file:line" of the [[topology.link]] that set them, for errors
};

// A host and its NICs (node indices; NIC k is rail k on a rail-optimised fabric).
struct Machine {
  std::string name;
  std::vector<uint32_t> nics;
};

struct Topology {
  uint32_t hosts = 0;  // NICs: nodes 0..hosts-1
  uint32_t switches = 0;
  std::vector<LinkSpec> links;
  std::vector<std::string> host_names;        // per NIC: "host3", or "host3.nic1" on a multi-NIC host
  std::vector<Machine> machines;              // every host, NICs in rail order
  std::vector<uint32_t> machine_of;           // per NIC: index into machines
  std::vector<std::string> switch_names;      // "leaf3", "spine0", "core1", ...
  std::vector<uint64_t> switch_buffer_bytes;  // per switch; 0 = switch.buffer_bytes
  std::vector<std::string> switch_at;         // per switch: where [[topology.node]] set its buffer
  // Directed links (from, to) whose egress queues are "the bottleneck" for summary metrics.
  std::vector<std::pair<uint32_t, uint32_t>> bottlenecks;
  std::vector<uint32_t> senders;    // star / dumbbell
  std::vector<uint32_t> receivers;  // star: one; dumbbell: one per sender
  uint32_t nodes() const { return hosts + switches; }
  const std::string& node_name(uint32_t n) const {
    return n < hosts ? host_names[n] : switch_names[n - hosts];
  }
  // Node by name (a NIC or a switch).
  std::optional<uint32_t> find_node(const std::string& name) const;
};

// Builds the topology a scenario names. Star: senders + 1 receiver on one switch. Dumbbell: senders on
// a left switch, as many receivers on a right switch, one fabric link between them. Leaf-spine:
// every leaf linked to every spine. Fat-tree: k pods of k/2 edge and k/2 aggregation switches,
// (k/2)^2 cores, k^3/4 hosts. Rail: `hosts` hosts with `rails` NICs each; NIC k of every host on a
// leaf of rail k (leaves_per_rail of them), every leaf linked to every spine. Custom: nothing but
// the lists. Then [[topology.node]] adds nodes and [[topology.link]] adds or amends links. Throws
// std::runtime_error naming the file, line and key of a bad entry.
Topology build_topology(const TopologyConfig& cfg);

// Expands a name or a range "host0..host15" (same prefix, numbers ascending) into names.
std::vector<std::string> expand_range(const std::string& name);

}  // namespace rdmad::sim
