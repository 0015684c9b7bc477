#pragma once
// RoCEv2 source-GID choice as a pure function of the GID table (the rule NCCL uses): type RoCE v2,
// bound to the configured netdev or a VLAN on top of it, not link-local, inside an optional CIDR,
// IPv4-mapped preferred on an IPv4 fabric (IPv6 on an IPv6 fabric). A fixed gid_index from the config
// overrides the rule. Call again after every address change (see AddressWatcher); never persist it.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rdmad/nic_cc/sysfs_root.h"
#include "gid_table.h"

namespace rdmad::verbs::rdma_core {

enum class IpFamily : uint8_t { kAny, kIpv4, kIpv6 };

// An address prefix in GID space: IPv4 prefixes match IPv4-mapped GIDs.
struct GidCidr {
  GidBytes prefix{};
  unsigned prefix_len = 0;  // 0..128, in GID bits (an IPv4 /24 is 96 + 24)

  // "10.10.0.0/16" or "fd00:10::/32"; nullopt if malformed.
  static std::optional<GidCidr> parse(std::string_view text);
  bool contains(const GidBytes& gid) const;
};

struct GidMatch {
  std::optional<uint32_t> gid_index;      // fixed index from config: used as is when the table has it
  std::string netdev;                     // empty: any netdev
  std::vector<std::string> vlan_netdevs;  // VLAN netdevs on top of `netdev`, also accepted
  IpFamily family = IpFamily::kIpv4;      // the fabric's address family
  std::optional<GidCidr> cidr;
};

struct GidChoice {
  std::optional<GidEntry> entry;
  std::string reason;  // why this entry, or why none: for the start-up log
  bool ok() const { return entry.has_value(); }
};

// Picks the source GID. Among the eligible entries: the preferred family first, then the configured
// netdev before its VLANs, then the lowest index.
GidChoice select_gid(std::span<const GidEntry> table, const GidMatch& match);

// VLAN (and other upper) netdevs stacked on `netdev`: the names of its upper_<name> links in sysfs.
std::vector<std::string> upper_netdevs(const nic_cc::SysfsRoot& root, std::string_view netdev);

}  // namespace rdmad::verbs::rdma_core
