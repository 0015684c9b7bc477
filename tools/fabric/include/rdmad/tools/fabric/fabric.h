#pragma once
// The fabric emulator as a library: each port runs its own thread that receives datagrams, queues
// them, drains them at the port rate and forwards them with the ECN bits preserved (CE set when RED
// marks). Tests run it in-process; rdmad-fabric wraps it in a CLI.
#include <cstddef>
#include <memory>
#include <vector>

#include "rdmad/tools/fabric/config.h"
#include "rdmad/tools/fabric/port_stats.h"

namespace rdmad::fabric {

class Port;

class Fabric {
 public:
  // Validates the config, opens and binds every socket (throws std::runtime_error naming the port
  // and errno on failure). Ports do not forward until start().
  explicit Fabric(FabricConfig config);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  // Starts one thread per port.
  void start();
  // Stops and joins the port threads; queued datagrams are discarded. Idempotent.
  void stop();

  size_t port_count() const { return ports_.size(); }
  // The bound listen address of a port (the real port number when the config asked for port 0).
  Endpoint listen_endpoint(size_t port) const;
  // A snapshot of a port's counters, published by the port thread every millisecond.
  PortStats stats(size_t port) const;
  std::vector<NamedPortStats> all_stats() const;
  const FabricConfig& config() const { return config_; }

 private:
  FabricConfig config_;
  std::vector<std::unique_ptr<Port>> ports_;
};

}  // namespace rdmad::fabric
