#include "rdmad/tools/fabric/fabric.h"

#include "port.h"

namespace rdmad::fabric {

Fabric::Fabric(FabricConfig config) : config_(std::move(config)) {
  for (size_t i = 0; i < config_.ports.size(); ++i) {
    if (config_.ports[i].name.empty()) config_.ports[i].name = "port" + std::to_string(i);
  }
  validate(config_);
  for (const PortConfig& p : config_.ports) ports_.push_back(std::make_unique<Port>(p));
}

Fabric::~Fabric() { stop(); }

void Fabric::start() {
  for (auto& p : ports_) p->start();
}

void Fabric::stop() {
  for (auto& p : ports_) p->stop();
}

Endpoint Fabric::listen_endpoint(size_t port) const { return ports_.at(port)->listen_endpoint(); }

PortStats Fabric::stats(size_t port) const { return ports_.at(port)->stats(); }

std::vector<NamedPortStats> Fabric::all_stats() const {
  std::vector<NamedPortStats> out;
  for (size_t i = 0; i < ports_.size(); ++i) out.push_back({config_.ports[i].name, ports_[i]->stats()});
  return out;
}

}  // namespace rdmad::fabric
