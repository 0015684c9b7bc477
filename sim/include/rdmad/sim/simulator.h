#pragma once
// The packet-level fabric simulator: hosts with paced per-QP senders running the cc/ reaction and
// notification points, links, output-queued switches with a shared buffer, dynamic thresholds,
// RED/ECN from cc/ and optional PFC. Deterministic: a scenario and seed give identical results.
#include <functional>
#include <memory>

#include "rdmad/sim/results.h"
#include "rdmad/sim/scenario.h"

namespace rdmad::sim {

class Network;

class Simulator {
 public:
  explicit Simulator(const Scenario& scenario);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // Runs to the end of the scenario and returns its results (wall_seconds included).
  RunResults run();
  // Bytes of simulator state per flow (flow record, reaction and notification point state).
  static size_t bytes_per_flow();

 private:
  std::unique_ptr<Network> net_;
};

}  // namespace rdmad::sim
