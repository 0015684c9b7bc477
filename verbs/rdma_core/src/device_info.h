#pragma once
// What the daemon knows about an RDMA device and its ports, gathered from sysfs (and, where a device
// can be opened, from ibv_query_port). Plain data for the start-up log and the metrics labels.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rdmad/nic_cc/sysfs_root.h"

namespace rdmad::verbs::rdma_core {

enum class LinkLayer : uint8_t { kUnknown, kInfiniBand, kEthernet };
std::string_view to_string(LinkLayer l);

struct PortInfo {
  unsigned port = 1;
  LinkLayer link_layer = LinkLayer::kUnknown;
  int state = 0;                  // IB port state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER
  std::string state_text;         // "ACTIVE"
  int phys_state = 0;             // 5 LinkUp, 3 Disabled, ...
  std::string phys_state_text;    // "LinkUp"
  uint64_t rate_mbps = 0;         // from `rate` ("100 Gb/sec (4X EDR)" → 100000); 0 unknown
  std::string rate_text;          // the `rate` file as is
  uint32_t active_mtu_bytes = 0;  // IB MTU in use; 0 unknown
  std::string netdev;             // Ethernet ports: the netdev the port sits on
  uint32_t netdev_mtu = 0;
  uint16_t lid = 0;  // InfiniBand only

  bool active() const { return state == 4; }
};

struct DeviceInfo {
  std::string name;         // "mlx5_0"
  std::string sysfs_path;   // resolved "/sys/devices/pci0000:3a/.../infiniband/mlx5_0"
  std::string pci_address;  // "0000:3b:00.0"; empty for a non-PCI (software) device
  int numa_node = -1;       // -1 unknown
  std::string node_type, fw_ver, hca_type, board_id, node_guid;
  std::vector<std::string> netdevs;  // netdevs of the same PCI function
  std::vector<PortInfo> ports;
};

// Parses a sysfs `rate` ("2.5 Gb/sec (1X SDR)", "400 Gb/sec (4X NDR)") into Mb/s; nullopt if malformed.
std::optional<uint64_t> parse_rate_mbps(std::string_view rate);
// Splits "4: ACTIVE" into 4 and "ACTIVE".
std::pair<int, std::string> parse_state(std::string_view text);
// The IB MTU a RoCE port runs on a netdev of `netdev_mtu` bytes: the largest of 256..4096 that fits
// with the RoCE headers (GRH 40, BTH 12, XRC 4, atomic 28, ICRC 4: as the kernel's iboe_get_mtu).
uint32_t roce_active_mtu(uint32_t netdev_mtu);

// Everything sysfs says about one device (by name under /sys/class/infiniband).
DeviceInfo read_device_sysfs(const nic_cc::SysfsRoot& root, std::string_view name);
// Every device under /sys/class/infiniband, sorted by name; empty is a normal state.
std::vector<DeviceInfo> discover_sysfs(const nic_cc::SysfsRoot& root);

// One line per port for the start-up log: "mlx5_0 port 1: Ethernet ACTIVE 100 Gb/s mtu 4096 netdev
// enp59s0f0np0 pci 0000:3b:00.0 numa 0 fw 22.39.1002".
std::vector<std::string> describe(const DeviceInfo& d);

}  // namespace rdmad::verbs::rdma_core
