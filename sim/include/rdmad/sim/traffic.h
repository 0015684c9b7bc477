#pragma once
// Traffic: the flows of a scenario's sources. The single [traffic] source (long flows, incast
// bursts, or Poisson arrivals at a target load with sizes from a flow-size CDF, as the HPCC traffic
// generator does), or any number of [[traffic.source]] entries: flows between named NICs, incasts to
// a named NIC at given times, Poisson arrivals among named hosts, explicit flow lines, and
// collectives over host groups (ring or halving-doubling AllReduce, all-to-all) whose phases wait
// for the data of the phase before.
#include <cstdint>
#include <string>
#include <vector>

#include "rdmad/sim/event_queue.h"
#include "rdmad/sim/scenario.h"
#include "rdmad/sim/topology.h"

namespace rdmad::sim {

inline constexpr uint32_t kNoFlow = UINT32_MAX;

struct FlowSpec {
  uint32_t src;  // NICs (topology nodes)
  uint32_t dst;
  uint64_t size_bytes;  // 0 = sends until the end of the run
  SimTimeNs start_ns;   // a flow that waits for another (Traffic::after): the earliest it may start
};

// A collective's flows, phase by phase (ring AllReduce: 2(N−1) phases; every rail's flows of a phase
// together).
struct CollectiveSpec {
  std::string name;
  std::string kind;       // "allreduce", "alltoall"
  std::string algorithm;  // "ring", "halving_doubling"; empty for all-to-all
  uint32_t ranks = 0;
  uint32_t rails = 0;       // NICs per rank carrying it (rank r's share on rail k uses its NIC k)
  uint64_t size_bytes = 0;  // per rank (all-to-all: per pair of ranks)
  SimTimeNs start_ns = 0;
  std::vector<std::vector<uint32_t>> phases;  // flow indices
};

struct Traffic {
  std::vector<FlowSpec> flows;  // sorted by start time (ties keep generation order)
  // after[i]: the flow whose last byte's arrival starts flow i (kNoFlow: it starts at its time).
  // Empty when no flow waits for another.
  std::vector<uint32_t> after;
  std::vector<CollectiveSpec> collectives;
  // The flows of incasts, for per-burst fairness (a burst: those that start together).
  std::vector<uint32_t> incast_flows;
  // Jain's index over windows: on for long flows; over every flow (window_flows empty) or those marked.
  bool jain_windows = true;
  std::vector<uint8_t> window_flows;
};

// The flows of a scenario. Deterministic in the seed: the single [traffic] source draws from the seed
// itself, source k of [[traffic.source]] from stream k (stream 0 is the seed). Throws
// std::runtime_error naming the file, line and key of a source whose names or shape do not fit the
// topology.
Traffic make_traffic(const Scenario& s, const Topology& topo);
// make_traffic(...).flows.
std::vector<FlowSpec> generate_traffic(const Scenario& s, const Topology& topo);
// The checks of make_traffic (names, group sizes) without generating the flows.
void check_traffic(const Scenario& s, const Topology& topo);

}  // namespace rdmad::sim
