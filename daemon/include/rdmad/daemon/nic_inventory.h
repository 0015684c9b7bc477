#pragma once
// The node's NICs: opens every [[nic]] through the backend registry at start-up, logs what it
// found (link layer, state, speed, address/GID), and exports per-port counters at scrape time.
#include <memory>
#include <string>
#include <vector>

#include <prometheus/collectable.h>

#include "rdmad/config/config.h"
#include "rdmad/verbs/device.h"
#include "rdmad/verbs/registry.h"

namespace rdmad::daemon {

struct Nic {
  config::NicSection config;
  std::unique_ptr<verbs::Device> device;
};

class NicInventory {
 public:
  explicit NicInventory(const verbs::BackendRegistry& registry) : registry_(registry) {}

  // Opens every configured NIC. On failure returns false and sets `error` to a sentence naming the
  // NIC and the cause (a start-up error: the daemon does not run half-configured).
  bool open(const config::Config& config, std::string& error);
  const std::vector<Nic>& nics() const { return nics_; }
  // Reads counters and port state from every NIC when Prometheus scrapes.
  std::shared_ptr<prometheus::Collectable> collector() const;

 private:
  const verbs::BackendRegistry& registry_;
  std::vector<Nic> nics_;
};

}  // namespace rdmad::daemon
