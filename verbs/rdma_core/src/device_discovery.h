#pragma once
// Device discovery through libibverbs, enriched from sysfs. Zero devices is a normal state (a node
// without NICs, a CI machine): it is logged and returned as an empty list, never as an error.
#include <string>
#include <vector>

#include "rdmad/nic_cc/sysfs_root.h"
#include "device_info.h"
#include "verbs_error.h"

namespace rdmad::verbs::rdma_core {

struct DiscoveredDevices {
  std::vector<DeviceInfo> devices;
  // Per-device problems that did not stop discovery ("ibv_open_device on mlx5_1: Permission denied").
  std::vector<std::string> warnings;
};

// ibv_get_device_list, then for each device: sysfs facts (PCI address, NUMA node, link layer, rate,
// netdev) and, when the device opens, ibv_query_port's state and active MTU. An error only when
// libibverbs itself fails in a way other than "no devices".
VerbsResult<DiscoveredDevices> discover_devices(const nic_cc::SysfsRoot& root);

// IB MTU enum (IBV_MTU_256..IBV_MTU_4096) to bytes; 0 for anything else.
uint32_t mtu_bytes(int ibv_mtu);

}  // namespace rdmad::verbs::rdma_core
