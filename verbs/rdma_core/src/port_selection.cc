#include "port_selection.h"

#include <fmt/format.h>

#include "device_mapping.h"

namespace rdmad::verbs::rdma_core {

base::Result<GidMatch, std::string> gid_match_from_config(const RdmaCoreConfig& config,
                                                            const nic_cc::SysfsRoot& root,
                                                            std::string_view port_netdev) {
  GidMatch m;
  if (config.gid_index >= 0) m.gid_index = static_cast<uint32_t>(config.gid_index);
  m.netdev = config.gid_netdev.empty() ? std::string(port_netdev) : config.gid_netdev;
  if (!m.netdev.empty()) m.vlan_netdevs = upper_netdevs(root, m.netdev);
  m.family = config.gid_ipv6 ? IpFamily::kIpv6 : IpFamily::kIpv4;
  if (!config.gid_cidr.empty()) {
    m.cidr = GidCidr::parse(config.gid_cidr);
    if (!m.cidr) return fmt::format("gid_cidr '{}' is not an address prefix", config.gid_cidr);
  }
  return m;
}

GidChoice select_port_gid(std::span<const GidEntry> table, const PortInfo& port, const GidMatch& match) {
  if (port.link_layer != LinkLayer::kInfiniBand) return select_gid(table, match);
  const uint32_t want = match.gid_index.value_or(0);
  for (const GidEntry& e : table) {
    if (e.index == want) return {e, fmt::format("InfiniBand port GID index {}", want)};
  }
  return {std::nullopt, fmt::format("InfiniBand port has no GID index {}", want)};
}

verbs::PortInfo port_info_from_sysfs(const nic_cc::SysfsRoot& root, const DeviceInfo& device,
                                     const PortInfo& port, const RdmaCoreConfig& config, GidChoice* choice) {
  GidChoice chosen;
  auto match = gid_match_from_config(config, root, port.netdev);
  if (match) {
    const auto table = read_gid_table_sysfs(root, device.name, port.port);
    chosen = select_port_gid(table, port, *match);
  } else {
    chosen.reason = match.error();
  }
  verbs::PortInfo out = to_verbs_port(port, chosen.entry ? chosen.entry->gid : GidBytes{});
  if (choice != nullptr) *choice = std::move(chosen);
  return out;
}

}  // namespace rdmad::verbs::rdma_core
