#pragma once
// A port's GID table as plain data, read either through ibv_query_gid_table (rdma-core ≥ 32) or from
// sysfs (gids/<i>, gid_attrs/types/<i>, gid_attrs/ndevs/<i>). GID indexes move whenever addresses
// change: read the table again, never keep an index.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rdmad/nic_cc/sysfs_root.h"
#include "verbs_error.h"

struct ibv_context;

namespace rdmad::verbs::rdma_core {

using GidBytes = std::array<uint8_t, 16>;

enum class GidType : uint8_t { kIb, kRoceV1, kRoceV2 };
std::string_view to_string(GidType t);

struct GidEntry {
  uint32_t index = 0;
  GidBytes gid{};
  GidType type = GidType::kIb;
  uint32_t ndev_ifindex = 0;  // 0: not bound to a netdev (InfiniBand)
  std::string ndev_name;

  bool operator==(const GidEntry&) const = default;
};

// "fe80:0000:0000:0000:ba3f:d2ff:fea1:b2c4" (sysfs form) or any IPv6 text ("::ffff:10.0.0.1").
std::optional<GidBytes> parse_gid(std::string_view text);
// Compressed IPv6 text ("::ffff:10.10.1.11", "fe80::ba3f:d2ff:fea1:b2c4").
std::string format_gid(const GidBytes& gid);
bool is_zero(const GidBytes& gid);
bool is_ipv4_mapped(const GidBytes& gid);  // ::ffff:a.b.c.d
bool is_link_local(const GidBytes& gid);   // fe80::/10

// Reads the table from sysfs, skipping empty (all-zero) slots and slots without a type. The sysfs
// type "IB/RoCE v1" means IB on an InfiniBand port and RoCE v1 on an Ethernet port. ifindex comes from
// /sys/class/net/<ndev>/ifindex.
std::vector<GidEntry> read_gid_table_sysfs(const nic_cc::SysfsRoot& root, std::string_view device,
                                           unsigned port);

// Reads the table of `port` through ibv_query_gid_table (every port's entries come back; the others
// are dropped). Netdev names come from if_indextoname.
VerbsResult<std::vector<GidEntry>> read_gid_table_verbs(ibv_context* ctx, std::string_view device,
                                                        unsigned port);

}  // namespace rdmad::verbs::rdma_core
