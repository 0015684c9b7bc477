#include "gid_selector.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <tuple>

namespace rdmad::verbs::rdma_core {

std::optional<GidCidr> GidCidr::parse(std::string_view text) {
  text = nic_cc::trim(text);
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const std::string addr(text.substr(0, slash));
  const std::string_view len_text = text.substr(slash + 1);
  unsigned len = 0;
  const auto [ptr, ec] = std::from_chars(len_text.data(), len_text.data() + len_text.size(), len);
  if (ec != std::errc() || ptr != len_text.data() + len_text.size()) return std::nullopt;
  GidCidr c;
  uint8_t v4[4];
  if (inet_pton(AF_INET, addr.c_str(), v4) == 1) {
    if (len > 32) return std::nullopt;
    c.prefix[10] = c.prefix[11] = 0xff;
    std::copy(v4, v4 + 4, c.prefix.begin() + 12);
    c.prefix_len = 96 + len;
    return c;
  }
  if (inet_pton(AF_INET6, addr.c_str(), c.prefix.data()) == 1 && len <= 128) {
    c.prefix_len = len;
    return c;
  }
  return std::nullopt;
}

bool GidCidr::contains(const GidBytes& gid) const {
  const unsigned full = prefix_len / 8;
  if (!std::equal(prefix.begin(), prefix.begin() + full, gid.begin())) return false;
  const unsigned rest = prefix_len % 8;
  if (rest == 0) return true;
  const auto mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (prefix[full] & mask) == (gid[full] & mask);
}

namespace {

struct Tally {
  size_t v2 = 0, other_netdev = 0, link_local = 0, outside_cidr = 0;
};

std::string describe_entry(const GidEntry& e) {
  return fmt::format("gid {} {} ({}, {})", e.index, format_gid(e.gid), to_string(e.type),
                     e.ndev_name.empty() ? "no netdev" : e.ndev_name);
}

}  // namespace

GidChoice select_gid(std::span<const GidEntry> table, const GidMatch& m) {
  if (m.gid_index) {
    const auto it =
        std::find_if(table.begin(), table.end(), [&](const GidEntry& e) { return e.index == *m.gid_index; });
    if (it == table.end())
      return {std::nullopt, fmt::format("configured gid_index {} is not in the GID table", *m.gid_index)};
    return {*it, describe_entry(*it) + ": fixed by gid_index in config"};
  }
  Tally t;
  const GidEntry* best = nullptr;
  std::tuple<int, int, uint32_t> best_key{};
  for (const auto& e : table) {
    if (e.type != GidType::kRoceV2) continue;
    ++t.v2;
    const bool exact = m.netdev.empty() || e.ndev_name == m.netdev;
    const bool vlan =
        std::find(m.vlan_netdevs.begin(), m.vlan_netdevs.end(), e.ndev_name) != m.vlan_netdevs.end();
    if (!exact && !vlan) {
      ++t.other_netdev;
      continue;
    }
    if (is_link_local(e.gid)) {
      ++t.link_local;
      continue;
    }
    if (m.cidr && !m.cidr->contains(e.gid)) {
      ++t.outside_cidr;
      continue;
    }
    const bool v4 = is_ipv4_mapped(e.gid);
    const int family_rank = m.family == IpFamily::kAny ? 0 : (v4 == (m.family == IpFamily::kIpv4) ? 0 : 1);
    const std::tuple<int, int, uint32_t> key{family_rank, exact ? 0 : 1, e.index};
    if (best == nullptr || key < best_key) {
      best = &e;
      best_key = key;
    }
  }
  if (best != nullptr) {
    std::string why = describe_entry(*best);
    if (std::get<0>(best_key) != 0) why += ": no GID of the fabric's address family, using the other family";
    return {*best, why};
  }
  return {
      std::nullopt,
      fmt::format(
          "no usable RoCE v2 GID{}: {} RoCE v2 entries, {} on other netdevs, {} link-local, {} outside {}",
          m.netdev.empty() ? "" : " on " + m.netdev, t.v2, t.other_netdev, t.link_local, t.outside_cidr,
          m.cidr ? "the cidr" : "(no cidr)")};
}

std::vector<std::string> upper_netdevs(const nic_cc::SysfsRoot& root, std::string_view netdev) {
  std::vector<std::string> out;
  constexpr std::string_view kPrefix = "upper_";
  for (const auto& name : root.list(fmt::format("/sys/class/net/{}", netdev))) {
    if (name.starts_with(kPrefix)) out.push_back(name.substr(kPrefix.size()));
  }
  return out;
}

}  // namespace rdmad::verbs::rdma_core
