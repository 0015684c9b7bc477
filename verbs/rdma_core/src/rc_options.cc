#include "rc_options.h"

#include <vector>

#include "gid_selector.h"
#include "rdmad/verbs/rdma_core/rdma_core_backend.h"

namespace rdmad::verbs::rdma_core {
namespace {

std::string cidr_or_empty(const std::string& s) {
  return s.empty() || GidCidr::parse(s) ? "" : "a CIDR such as 10.1.0.0/16 or fd00::/8, or empty";
}

std::vector<OptionSpec> make_table() {
  const RdmaCoreConfig d;
  std::vector<OptionSpec> t;
  t.push_back(OptionSpec::integer("port", int64_t{d.port}, 1, 255, "Port number of the rdma-core device (1-based)."));
  t.push_back(OptionSpec::integer("gid_index", int64_t{d.gid_index}, -1, 255,
               "Fixed GID index; -1 selects a RoCEv2 GID bound to the port's netdev automatically (re-selected when "
               "addresses change)."));
  t.push_back(OptionSpec::text("gid_netdev", d.gid_netdev,
               "Netdev the automatically selected RoCEv2 GID must be bound to (the VLAN netdevs on top of it "
               "qualify too); empty takes the port's own netdev.",
               nullptr, "a netdev name, or empty"));
  t.push_back(OptionSpec::text("gid_cidr", d.gid_cidr,
               "Prefix the automatically selected GID's address must lie in (e.g. 10.1.0.0/16); empty accepts any.",
               cidr_or_empty, "a CIDR such as 10.1.0.0/16 or fd00::/8, or empty"));
  t.push_back(OptionSpec::boolean("gid_ipv6", d.gid_ipv6,
               "The fabric is IPv6: select an IPv6 GID rather than an IPv4-mapped one."));
  t.push_back(OptionSpec::integer("dscp", int64_t{d.dscp}, 0, 63,
               "DSCP of the NIC's RoCE data packets (the traffic class of their GRH, with ECT(0)); the fabric's "
               "lossless or ECN class is usually chosen by it."));
  t.push_back(OptionSpec::integer("sl", int64_t{d.sl}, 0, 15,
               "Service level of the NIC's queue pairs: on InfiniBand the SL of every packet (the subnet's SL-to-VL "
               "tables map it), on RoCE the priority mlx5 derives the 802.1p PCP from where the port does not trust "
               "DSCP."));
  t.push_back(OptionSpec::text("sysfs_root", d.sysfs_root,
               "Directory that stands in for / when reading sysfs (containers mounting the host's elsewhere, "
               "fixture trees in tests).",
               [](const std::string& s) { return !s.empty() && s[0] == '/' ? "" : "an absolute path"; },
               "an absolute path"));
  return t;
}

}  // namespace

const std::vector<OptionSpec>& option_table() {
  static const std::vector<OptionSpec> table = make_table();
  return table;
}

Result<RdmaCoreConfig> rdma_core_config(const DeviceConfig& config) {
  auto parsed = OptionValues::parse("rdma_core", option_table(), config.backend_options);
  if (!parsed.ok()) return parsed.status();
  const OptionValues& o = parsed.value();
  RdmaCoreConfig c;
  c.name = config.name;
  // The table's ranges make every narrowing below exact.
  c.port = static_cast<uint8_t>(o.integer("port"));
  c.gid_index = static_cast<int>(o.integer("gid_index"));
  c.gid_netdev = o.text("gid_netdev");
  c.gid_cidr = o.text("gid_cidr");
  c.gid_ipv6 = o.boolean("gid_ipv6");
  c.dscp = static_cast<uint8_t>(o.integer("dscp"));
  c.sl = static_cast<uint8_t>(o.integer("sl"));
  c.sysfs_root = o.text("sysfs_root");
  return c;
}

}  // namespace rdmad::verbs::rdma_core
