#include "host_discovery.h"

#include <algorithm>

#include <fmt/format.h>

#include "address_watcher.h"
#include "device_discovery.h"
#include "gid_table.h"

namespace rdmad::verbs::rdma_core {
namespace {

HostLinkLayer host_layer(LinkLayer l) {
  switch (l) {
    case LinkLayer::kInfiniBand: return HostLinkLayer::kInfiniBand;
    case LinkLayer::kEthernet: return HostLinkLayer::kEthernet;
    case LinkLayer::kUnknown: break;
  }
  return HostLinkLayer::kUnknown;
}

// With `gids`, each port's GID table too.
void add_device(const nic_cc::SysfsRoot& root, const DeviceInfo& d, bool gids, HostNics& out) {
  out.devices.push_back(d.name);
  const std::vector<std::string> lines = describe(d);
  if (d.ports.empty()) {
    out.notes.insert(out.notes.end(), lines.begin(), lines.end());
    return;
  }
  for (size_t i = 0; i < d.ports.size(); ++i) {
    const PortInfo& p = d.ports[i];
    HostNic n;
    n.device = d.name;
    n.port = p.port;
    n.netdev = p.netdev;
    n.pci = d.pci_address;
    n.numa = d.numa_node;
    n.link = {host_layer(p.link_layer), p.state, p.state_text, p.rate_mbps, p.active_mtu_bytes};
    n.summary = i < lines.size() ? lines[i] : std::string();
    if (gids)
      for (const GidEntry& g : read_gid_table_sysfs(root, d.name, p.port))
        n.gids.push_back({g.index, g.gid, std::string(to_string(g.type)), g.ndev_name});
    out.ports.push_back(std::move(n));
  }
}

class AddressChangeWatch final : public ChangeWatch {
 public:
  explicit AddressChangeWatch(AddressWatcher w) : w_(std::move(w)) {}
  int fd() const override { return w_.fd(); }
  bool drain() override { return w_.drain().any(); }

 private:
  AddressWatcher w_;
};

}  // namespace

Result<HostNics> discover_host(const HostScan& scan) {
  const nic_cc::SysfsRoot root(scan.sysfs_root);
  HostNics out;
  if (!scan.sysfs_only) {
    auto found = discover_devices(root);
    if (!found.ok()) return Status::error(found.error().message());
    for (const DeviceInfo& d : found.value().devices) add_device(root, d, scan.gids, out);
    out.warnings = std::move(found.value().warnings);
  }
  // Devices that sysfs shows but libibverbs did not list (no provider, or a fixture root): their CC
  // parameters and counters are still manageable through sysfs.
  for (const std::string& name : scan.devices) {
    if (std::find(out.devices.begin(), out.devices.end(), name) != out.devices.end()) continue;
    if (!root.exists("/sys/class/infiniband/" + name)) continue;
    add_device(root, read_device_sysfs(root, name), scan.gids, out);
  }
  return out;
}

Result<std::unique_ptr<ChangeWatch>> watch_addresses() {
  auto w = AddressWatcher::open();
  if (!w) return Status::error(w.error().message());
  return std::unique_ptr<ChangeWatch>(std::make_unique<AddressChangeWatch>(std::move(w.value())));
}

}  // namespace rdmad::verbs::rdma_core
