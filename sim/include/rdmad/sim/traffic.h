#pragma once
// Traffic generators: long-lived flows with start times, incast bursts, and Poisson arrivals at a
// target load with sizes drawn from a flow-size CDF (as the HPCC traffic generator does).
#include <cstdint>
#include <vector>

#include "rdmad/sim/event_queue.h"
#include "rdmad/sim/scenario.h"
#include "rdmad/sim/topology.h"

namespace rdmad::sim {

struct FlowSpec {
  uint32_t src;
  uint32_t dst;
  uint64_t size_bytes;  // 0 = sends until the end of the run
  SimTimeNs start_ns;
};

// The flows of a scenario, sorted by start time (ties keep generation order). Deterministic in the seed.
std::vector<FlowSpec> generate_traffic(const Scenario& s, const Topology& topo);

}  // namespace rdmad::sim
