#pragma once
// What a dpdk NIC is opened with: the engine's configuration and the port's (option_table() in
// dpdk_backend.h, read from DeviceConfig::backend_options by dpdk_config).
#include "dpdk_port.h"
#include "rdmad/verbs/engine/engine.h"
#include "rdmad/verbs/registry.h"

namespace rdmad::verbs::dpdk {

struct DpdkConfig {
  engine::EngineConfig engine;
  DpdkPortConfig port;
};

/// An error names the option (and the backend) that is unknown or invalid.
Result<DpdkConfig> dpdk_config(const DeviceConfig& config);

}  // namespace rdmad::verbs::dpdk
