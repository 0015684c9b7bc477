#include "rdmad/daemon/nics/nic_inventory.h"

namespace rdmad::daemon {

verbs::DeviceConfig device_config_for(const config::NicSection& n, const config::Config& config,
                                      const verbs::BackendInfo* backend) {
  if (backend == nullptr) return {};  // the registry refuses the open, naming the backend
  verbs::DeviceConfig dc;
  dc.name = backend->caps.opens_named_device ? n.device : n.name;
  dc.address = n.address;
  dc.dcqcn = config.cc.params;
  if (n.cnp_dscp >= 0) dc.dcqcn.cnp_dscp = static_cast<uint8_t>(n.cnp_dscp);
  // Each option of the backend's table that the section gives (its key, or the key's default);
  // a section made in code gives none of the generated ones, and the backend's defaults apply.
  auto set = [&](const std::string& name, verbs::OptionValue v) {
    for (const verbs::OptionSpec& spec : backend->options)
      if (spec.name == name) dc.backend_options[name] = std::move(v);
  };
  for (const verbs::OptionSpec& spec : backend->options)
    if (auto v = n.backend_option(spec.name)) dc.backend_options[spec.name] = *v;
  // The options that come from other keys (config::derived_nic_options).
  // Peers reach an advertised NIC through a relay (an rdmad-fabric port) that forwards from the
  // advertised address and port: the one source its QPs accept besides their peers. The relay
  // re-seals the ICRC, so the NIC verifies every packet like any other.
  if (!n.advertise_address.empty()) {
    set("relay_address", n.advertise_address);
    set("relay_udp_port", n.advertise_udp_port != 0 ? n.advertise_udp_port : n.udp_port);
  }
  set("gid_cidr", n.gid_match);
  if (backend->caps.address_selects_gid && !n.address.empty()) {
    // The address names the GID: the one entry whose address it is (the loader made sure it lies
    // in gid_match, and that no gid_index is set).
    const bool v6 = n.address.find(':') != std::string::npos;
    set("gid_cidr", n.address + (v6 ? "/128" : "/32"));
    if (v6) set("gid_ipv6", true);
  }
  if (!config.daemon.sysfs_root.empty()) set("sysfs_root", config.daemon.sysfs_root);
  return dc;
}

}  // namespace rdmad::daemon
