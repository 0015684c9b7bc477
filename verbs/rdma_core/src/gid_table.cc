#include "gid_table.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <infiniband/verbs.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rdmad::verbs::rdma_core {

std::string_view to_string(GidType t) {
  switch (t) {
    case GidType::kIb:
      return "IB";
    case GidType::kRoceV1:
      return "RoCE v1";
    case GidType::kRoceV2:
      return "RoCE v2";
  }
  return "?";
}

std::optional<GidBytes> parse_gid(std::string_view text) {
  const std::string s(nic_cc::trim(text));
  GidBytes g{};
  if (inet_pton(AF_INET6, s.c_str(), g.data()) != 1) return std::nullopt;
  return g;
}

std::string format_gid(const GidBytes& gid) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, gid.data(), buf, sizeof(buf));
  return buf;
}

bool is_zero(const GidBytes& gid) {
  return std::all_of(gid.begin(), gid.end(), [](uint8_t b) { return b == 0; });
}

bool is_ipv4_mapped(const GidBytes& gid) {
  return std::all_of(gid.begin(), gid.begin() + 10, [](uint8_t b) { return b == 0; }) && gid[10] == 0xff &&
         gid[11] == 0xff;
}

bool is_link_local(const GidBytes& gid) { return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80; }

std::vector<GidEntry> read_gid_table_sysfs(const nic_cc::SysfsRoot& root, std::string_view device,
                                           unsigned port) {
  const std::string p = fmt::format("/sys/class/infiniband/{}/ports/{}", device, port);
  const bool ethernet = root.read_trimmed(p + "/link_layer").value_or("") == "Ethernet";
  std::vector<GidEntry> out;
  for (const auto& name : root.list(p + "/gids")) {
    const auto index = nic_cc::parse_u64(name);
    if (!index) continue;
    const auto text = root.read_trimmed(p + "/gids/" + name);
    const auto gid = text ? parse_gid(*text) : std::nullopt;
    if (!gid || is_zero(*gid)) continue;
    // Reading the type of an unused slot fails (EINVAL on a real kernel).
    const auto type = root.read_trimmed(p + "/gid_attrs/types/" + name);
    if (!type) continue;
    GidEntry e;
    e.index = static_cast<uint32_t>(*index);
    e.gid = *gid;
    e.type = *type == "RoCE v2" ? GidType::kRoceV2 : ethernet ? GidType::kRoceV1 : GidType::kIb;
    e.ndev_name = root.read_trimmed(p + "/gid_attrs/ndevs/" + name).value_or("");
    if (!e.ndev_name.empty()) {
      e.ndev_ifindex =
          static_cast<uint32_t>(root.read_u64("/sys/class/net/" + e.ndev_name + "/ifindex").value_or(0));
    }
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const GidEntry& a, const GidEntry& b) { return a.index < b.index; });
  return out;
}

VerbsResult<std::vector<GidEntry>> read_gid_table_verbs(ibv_context* ctx, std::string_view device,
                                                        unsigned port) {
  ibv_device_attr dev_attr{};
  if (const int rc = ibv_query_device(ctx, &dev_attr); rc != 0) {
    return VerbsError{"ibv_query_device", std::string(device), rc > 0 ? rc : errno};
  }
  ibv_port_attr port_attr{};
  if (const int rc = ibv_query_port(ctx, static_cast<uint8_t>(port), &port_attr); rc != 0) {
    return VerbsError{"ibv_query_port", std::string(device), rc > 0 ? rc : errno};
  }
  // The call returns the valid entries of every port; size the buffer for all of them.
  const size_t max_entries =
      static_cast<size_t>(port_attr.gid_tbl_len) * std::max<uint8_t>(dev_attr.phys_port_cnt, 1);
  std::vector<ibv_gid_entry> raw(max_entries);
  const ssize_t n = ibv_query_gid_table(ctx, raw.data(), raw.size(), 0);
  if (n < 0) return VerbsError{"ibv_query_gid_table", std::string(device), static_cast<int>(-n)};
  std::vector<GidEntry> out;
  for (ssize_t i = 0; i < n; ++i) {
    const auto& r = raw[static_cast<size_t>(i)];
    if (r.port_num != port) continue;
    GidEntry e;
    e.index = r.gid_index;
    std::memcpy(e.gid.data(), r.gid.raw, e.gid.size());
    e.type = r.gid_type == IBV_GID_TYPE_ROCE_V2   ? GidType::kRoceV2
             : r.gid_type == IBV_GID_TYPE_ROCE_V1 ? GidType::kRoceV1
                                                  : GidType::kIb;
    e.ndev_ifindex = r.ndev_ifindex;
    char name[IF_NAMESIZE] = {};
    if (r.ndev_ifindex != 0 && if_indextoname(r.ndev_ifindex, name) != nullptr) e.ndev_name = name;
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const GidEntry& a, const GidEntry& b) { return a.index < b.index; });
  return out;
}

}  // namespace rdmad::verbs::rdma_core
