#include "rdmad/sim/simulator.h"

#include "network.h"

namespace rdmad::sim {

Simulator::Simulator(const Scenario& scenario) : net_(std::make_unique<Network>(scenario)) {}
Simulator::~Simulator() = default;

RunResults Simulator::run() { return net_->run(); }

size_t Simulator::bytes_per_flow() { return sizeof(Flow) + sizeof(FlowSpec); }

}  // namespace rdmad::sim
