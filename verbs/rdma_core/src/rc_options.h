#pragma once
// What an rdma_core NIC is opened with: DeviceConfig's name and the backend's options
// (option_table() in rdma_core_backend.h, read from DeviceConfig::backend_options by
// rdma_core_config).
#include <cstdint>
#include <string>

#include "rdmad/verbs/registry.h"

namespace rdmad::verbs::rdma_core {

struct RdmaCoreConfig {
  std::string name;  // the device (empty: the first one libibverbs lists)
  // The options, at their defaults (option_table() takes its defaults from here and documents each).
  uint8_t port = 1;
  int gid_index = -1;  // >= 0 fixes the GID; -1 selects by gid_netdev / gid_cidr / gid_ipv6
  std::string gid_netdev;  // empty: the port's own netdev
  std::string gid_cidr;    // empty: any address
  bool gid_ipv6 = false;
  uint8_t dscp = 26;
  uint8_t sl = 0;
  std::string sysfs_root = "/";
};

/// An error names the option (and the backend) that is unknown or invalid.
Result<RdmaCoreConfig> rdma_core_config(const DeviceConfig& config);

}  // namespace rdmad::verbs::rdma_core
