#include "rdmad/daemon/nics/nic_inventory.h"

namespace rdmad::daemon {

verbs::DeviceConfig device_config_for(const config::NicSection& n, const config::Config& config,
                                      const verbs::BackendInfo* backend) {
  const verbs::Capabilities caps = backend != nullptr ? backend->caps : verbs::Capabilities{};
  verbs::DeviceConfig dc;
  dc.name = caps.opens_named_device ? n.device : n.name;
  dc.address = n.address;
  dc.udp_port = static_cast<uint16_t>(n.udp_port);
  // Peers reach an advertised NIC through a relay (an rdmad-fabric port) that forwards from the
  // advertised address and port: the one source its QPs accept besides their peers. The relay
  // re-seals the ICRC, so the NIC verifies every packet like any other.
  if (!n.advertise_address.empty()) {
    dc.relay_address = n.advertise_address;
    dc.relay_udp_port = static_cast<uint16_t>(n.advertise_udp_port != 0 ? n.advertise_udp_port : n.udp_port);
  }
  dc.udp_offload = n.udp_offload;
  dc.source_ports = static_cast<uint32_t>(n.source_ports);
  dc.dcqcn = config.cc.params;
  if (n.cnp_dscp >= 0) dc.dcqcn.cnp_dscp = static_cast<uint8_t>(n.cnp_dscp);
  dc.port = static_cast<uint8_t>(n.port);
  dc.gid_index = static_cast<int>(n.gid_index);
  dc.gid_cidr = n.gid_match;
  if (caps.address_selects_gid && !n.address.empty()) {
    // The address names the GID: the one entry whose address it is (the loader made sure it lies
    // in gid_match, and that no gid_index is set).
    const bool v6 = n.address.find(':') != std::string::npos;
    dc.gid_cidr = n.address + (v6 ? "/128" : "/32");
    dc.gid_ipv6 = v6;
  }
  dc.dscp = static_cast<uint8_t>(n.dscp);
  dc.sl = static_cast<uint8_t>(n.sl);
  dc.sysfs_root = config.daemon.sysfs_root;
  return dc;
}

}  // namespace rdmad::daemon
