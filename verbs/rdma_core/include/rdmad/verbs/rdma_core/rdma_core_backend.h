#pragma once
// The rdma_core backend ("rdma_core"): real RDMA NICs through libibverbs. The one public header
// of this backend (its registration, reached through register_builtin_backends); everything else
// goes through the verbs interface. Its internal headers are in its src/, which only the tests of
// its internals add to their include path.
//
// Per NIC the daemon fills DeviceConfig: `name` (empty: the first device) and the options of
// option_table(): `port`, `gid_index` (>= 0 fixes it) or `gid_netdev` / `gid_cidr` / `gid_ipv6`,
// `dscp`, `sl`, `sysfs_root`. The source GID is selected again at
// every query_port() and at every modify() carrying kQpAv, so address changes are picked up without
// keeping an index; after an AddressWatcher event the daemon calls query_port() to log the new GID.
// NIC congestion control (cc_apply) is not part of the verbs device: nic_location() gives the netdev
// and PCI address that rdmad/nic_cc/ (inspect_cc, locate_cc_params, apply_cc_params) needs.
#include <optional>
#include <string>
#include <vector>

#include "rdmad/verbs/registry.h"

namespace rdmad::verbs::rdma_core {

/// Names of the devices ibv_get_device_list finds (empty on a host without RDMA devices).
std::vector<std::string> list_device_names();

/// {name "rdma_core", capabilities, factory}. The capabilities are probed on the first device
/// (dma-buf by the fd = -1 probe, limits by ibv_query_device); with no device everything is off and
/// open() fails with "no RDMA device: ibv_get_device_list found 0 devices".
BackendInfo backend_info();

/// The capabilities that hold whether or not a device is present (how the daemon treats hardware
/// NICs); the device's features and limits are left at their defaults.
Capabilities static_capabilities();

/// Its options (BackendInfo::options), with defaults, ranges and help.
const std::vector<OptionSpec>& option_table();

/// Adds the rdma_core backend to a registry.
inline void register_backend(BackendRegistry& registry) { registry.add(backend_info()); }

/// Where an opened rdma_core device sits on the host, for rdmad/nic_cc/ (CC parameters, counters).
struct NicLocation {
  std::string device;  // "mlx5_0"
  uint8_t port = 1;
  std::string netdev;       // the port's netdev (empty on InfiniBand)
  std::string pci_address;  // empty for a software device (rxe)
  std::string sysfs_root;   // the root its sysfs facts were read under
};

/// nullopt for a device of another backend.
std::optional<NicLocation> nic_location(const Device& device);

/// The vendor id rxe (Soft-RoCE) reports in ibv_query_device (RXE_VENDOR_ID, the kernel's
/// drivers/infiniband/sw/rxe/rxe_param.h).
inline constexpr uint32_t kRxeVendorId = 0xffffff;

/// ibv_query_device's vendor_id of an opened device; nullopt for a device of another backend.
std::optional<uint32_t> vendor_id(const Device& device);

}  // namespace rdmad::verbs::rdma_core
