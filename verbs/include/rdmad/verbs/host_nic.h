#pragma once
// The NIC ports a host has, as a backend finds them without opening anything for the datapath
// (BackendInfo::discover): plain data for the start-up log, metrics labels, CC management through
// sysfs and the NUMA/PCI placement of client memory. The daemon never sees a backend's own types.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rdmad::verbs {

enum class HostLinkLayer : uint8_t { kUnknown, kInfiniBand, kEthernet };
/// "InfiniBand", "Ethernet" or "unknown" (the metrics' link_layer label).
std::string_view to_string(HostLinkLayer l);

struct HostLink {
  HostLinkLayer layer = HostLinkLayer::kUnknown;
  // The sysfs `state` numbering (and node_exporter's state_id): 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE,
  // 5 ACTIVE_DEFER; 0 unknown.
  int state = 0;
  std::string state_text;   // "ACTIVE"
  uint64_t speed_mbps = 0;  // 0 unknown
  uint32_t mtu_bytes = 0;   // active MTU; 0 unknown
};

/// One entry of a port's GID table, as the kernel shows it now (show_gids). Indexes move whenever
/// addresses change: for display, never to keep.
struct HostGid {
  uint32_t index = 0;
  std::array<uint8_t, 16> gid{};  // network order; IPv4 as ::ffff:a.b.c.d
  std::string type;               // "IB", "RoCE v1" or "RoCE v2"
  std::string netdev;             // empty: not bound to a netdev (InfiniBand)
};

/// One port of one device.
struct HostNic {
  std::string device;  // "mlx5_0"
  unsigned port = 1;
  std::string netdev;  // the port's netdev (empty on InfiniBand)
  std::string pci;     // "0000:3b:00.0"; a software device takes its netdev's PCI function
  int numa = -1;       // -1 unknown
  HostLink link;
  std::vector<HostGid> gids;  // the port's non-empty GID table entries (HostScan::gids)
  std::string summary;  // the backend's line for the start-up log
};

/// What to look for.
struct HostScan {
  std::string sysfs_root = "/";  // stands in for "/" (fixture trees in tests)
  // Devices to report even where the backend's own listing misses them (configured [[nic]] devices
  // that sysfs shows but libibverbs does not list: no provider, or a fixture root).
  std::vector<std::string> devices;
  // Only `devices`, from sysfs alone: cheap enough for every scrape (link state and speed).
  bool sysfs_only = false;
  // Also read each port's GID table (HostNic::gids): a few hundred sysfs reads per port.
  bool gids = false;
};

struct HostNics {
  std::vector<HostNic> ports;
  std::vector<std::string> devices;   // every device found, with or without ports
  std::vector<std::string> notes;     // lines for the start-up log ("mlx5_1: no ports in sysfs")
  std::vector<std::string> warnings;  // per-device problems that did not stop discovery
};

}  // namespace rdmad::verbs
