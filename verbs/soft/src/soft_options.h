#pragma once
// What a soft NIC is opened with: the engine's configuration and the UDP port's (option_table() in
// soft_backend.h, read from DeviceConfig::backend_options by soft_config).
#include "rdmad/verbs/engine/engine.h"
#include "rdmad/verbs/registry.h"
#include "udp_port.h"

namespace rdmad::verbs::soft {

struct SoftConfig {
  engine::EngineConfig engine;
  UdpPortConfig port;
};

/// An error names the option (and the backend) that is unknown or invalid.
Result<SoftConfig> soft_config(const DeviceConfig& config);

}  // namespace rdmad::verbs::soft
