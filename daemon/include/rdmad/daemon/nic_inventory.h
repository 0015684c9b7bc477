#pragma once
// The node's NICs: opens every [[nic]] through the backend registry at start-up, logs what it
// found (link layer, state, speed, address/GID), exports per-port counters at scrape time, and
// samples the software NICs' DCQCN state (rate, α per QP) into histograms.
#include <memory>
#include <string>
#include <vector>

#include <prometheus/collectable.h>

#include "rdmad/config/config.h"
#include "rdmad/verbs/device.h"
#include "rdmad/verbs/registry.h"

namespace prometheus {
class Histogram;
class Registry;
}  // namespace prometheus

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
  // Registers rdmad_dcqcn_rate_mbps and rdmad_dcqcn_alpha on `registry` with one child per soft NIC
  // port, so the families show (empty) before any QP is up. Call once, after open(). Hardware NICs
  // have none: their DCQCN runs in firmware (nic_cc reports its configuration).
  void add_dcqcn_metrics(prometheus::Registry& registry);
  // Observes the rate and α of every QP in RTS on every soft NIC (the daemon calls it every second).
  void sample_dcqcn();

 private:
  struct DcqcnHistograms {
    const verbs::Device* device;
    prometheus::Histogram* rate_mbps;
    prometheus::Histogram* alpha;
  };

  const verbs::BackendRegistry& registry_;
  std::vector<Nic> nics_;
  std::vector<DcqcnHistograms> dcqcn_;
};

}  // namespace rdmad::daemon
