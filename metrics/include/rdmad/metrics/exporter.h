#pragma once
// The Prometheus endpoint: one registry shared by every subsystem, served over HTTP at /metrics by
// prometheus-cpp's Exposer. Subsystems add families to registry() (or register their own
// Collectable that reads counters at scrape time).
#include <memory>
#include <string>
#include <vector>

#include <prometheus/registry.h>

#include "rdmad/base/result.h"

namespace prometheus {
class Exposer;
}

namespace rdmad::metrics {

class Exporter {
 public:
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  // Starts serving /metrics on `listen` ("127.0.0.1:9842", "[::1]:0"; port 0 picks a free port).
  // On failure (bad address, port in use) an error whose message names the address and the cause.
  static base::Result<std::unique_ptr<Exporter>> start(const std::string& listen);

  prometheus::Registry& registry() { return *registry_; }
  // Registers another collectable (e.g. a collector that reads datapath counters at scrape time).
  void add_collectable(const std::weak_ptr<prometheus::Collectable>& c);
  // The port actually bound (useful with port 0).
  int port() const;
  // "http://127.0.0.1:9842/metrics"
  std::string url() const;

 private:
  Exporter() = default;
  std::string host_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace rdmad::metrics
