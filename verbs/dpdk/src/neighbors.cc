#include "neighbors.h"

#include <algorithm>
#include <cstring>

namespace rdmad::verbs::dpdk {
namespace {

constexpr size_t kArpBytes = 28;  // Ethernet/IPv4 ARP
constexpr uint16_t kArpRequest = 1;
constexpr uint16_t kArpReply = 2;
constexpr size_t kIcmpNdBytes = 32;  // NS/NA with one link-layer address option
constexpr uint8_t kNs = 135;
constexpr uint8_t kNa = 136;
constexpr uint8_t kOptSourceLl = 1;
constexpr uint8_t kOptTargetLl = 2;
constexpr uint8_t kNaSolicited = 0x40;
constexpr uint8_t kNaOverride = 0x20;

void write_eth(uint8_t* out, const MacAddr& dst, const MacAddr& src, uint16_t type) {
  std::memcpy(out, dst.data(), 6);
  std::memcpy(out + 6, src.data(), 6);
  store_be16(out + 12, type);
}

// Pads a frame to Ethernet's minimum (a NIC would; memif and af_packet do not).
size_t padded(uint8_t* frame, size_t n) {
  if (n >= kMinFrameBytes) return n;
  std::memset(frame + n, 0, kMinFrameBytes - n);
  return kMinFrameBytes;
}

size_t write_arp(std::span<uint8_t> out, uint16_t op, const MacAddr& eth_dst, const LinkAddress& from,
                 const MacAddr& target_mac, const uint8_t* target_ip) {
  uint8_t* f = out.data();
  write_eth(f, eth_dst, from.mac, kEtherTypeArp);
  uint8_t* a = f + kEthHeaderBytes;
  store_be16(a, 1);  // Ethernet
  store_be16(a + 2, kEtherTypeIpv4);
  a[4] = 6;
  a[5] = 4;
  store_be16(a + 6, op);
  std::memcpy(a + 8, from.mac.data(), 6);
  std::memcpy(a + 14, from.ip.bytes.data(), 4);
  std::memcpy(a + 18, target_mac.data(), 6);
  std::memcpy(a + 24, target_ip, 4);
  return padded(f, kEthHeaderBytes + kArpBytes);
}

roce::IpAddr v6_at(const uint8_t* p) {
  roce::IpAddr a;
  a.v6 = true;
  std::memcpy(a.bytes.data(), p, 16);
  return a;
}

// The ICMPv6 checksum over the pseudo-header and the message.
uint16_t icmpv6_checksum(const uint8_t* ip6, std::span<const uint8_t> icmp) {
  InetChecksum c;
  c.add({ip6 + 8, 32});
  c.add16(static_cast<uint16_t>(icmp.size()));
  c.add16(kIpProtoIcmpv6);
  c.add(icmp);
  return c.value();
}

// An NS or NA from `from` to IPv6 `dst` (Ethernet `eth_dst`): hop limit 255 as RFC 4861 requires,
// one link-layer address option (ours).
size_t write_nd(std::span<uint8_t> out, uint8_t type, uint8_t flags, const MacAddr& eth_dst, const roce::IpAddr& dst,
                const LinkAddress& from, const roce::IpAddr& target) {
  uint8_t* f = out.data();
  write_eth(f, eth_dst, from.mac, kEtherTypeIpv6);
  uint8_t* ip6 = f + kEthHeaderBytes;
  std::memset(ip6, 0, roce::kIpv6HeaderBytes + kIcmpNdBytes);
  ip6[0] = 0x60;
  store_be16(ip6 + 4, kIcmpNdBytes);
  ip6[6] = kIpProtoIcmpv6;
  ip6[7] = 255;
  std::memcpy(ip6 + 8, from.ip.bytes.data(), 16);
  std::memcpy(ip6 + 24, dst.bytes.data(), 16);
  uint8_t* icmp = ip6 + roce::kIpv6HeaderBytes;
  icmp[0] = type;
  icmp[4] = flags;
  std::memcpy(icmp + 8, target.bytes.data(), 16);
  icmp[24] = type == kNs ? kOptSourceLl : kOptTargetLl;
  icmp[25] = 1;  // in units of 8 bytes
  std::memcpy(icmp + 26, from.mac.data(), 6);
  store_be16(icmp + 2, icmpv6_checksum(ip6, {icmp, kIcmpNdBytes}));
  return kEthHeaderBytes + roce::kIpv6HeaderBytes + kIcmpNdBytes;
}

// The link-layer address option of type `want` among an NS/NA's options, if any.
std::optional<MacAddr> ll_option(std::span<const uint8_t> options, uint8_t want) {
  while (options.size() >= 8) {
    const size_t len = size_t{options[1]} * 8;
    if (len == 0 || len > options.size()) return std::nullopt;  // malformed: RFC 4861 says drop
    if (options[0] == want && len >= 8) {
      MacAddr m;
      std::memcpy(m.data(), options.data() + 2, 6);
      return m;
    }
    options = options.subspan(len);
  }
  return std::nullopt;
}

}  // namespace

NeighborTable::NeighborTable() : entries_(std::make_unique<Entry[]>(kCapacity)) {}

NeighborTable::Entry* NeighborTable::find(const roce::IpAddr& ip) const {
  const size_t n = count_.load(std::memory_order_acquire);
  for (size_t i = 0; i < n; ++i)
    if (entries_[i].ip == ip) return &entries_[i];
  return nullptr;
}

NeighborTable::Entry* NeighborTable::add(const roce::IpAddr& ip) {
  std::lock_guard lock(add_mu_);
  if (Entry* e = find(ip)) return e;
  const size_t n = count_.load(std::memory_order_relaxed);
  if (n == kCapacity) return nullptr;
  entries_[n].ip = ip;
  count_.store(n + 1, std::memory_order_release);
  return &entries_[n];
}

Status NeighborTable::add_static(const roce::IpAddr& ip, const MacAddr& mac) {
  if (find(ip) != nullptr) return Status::error("neighbor " + ip_string(ip) + " given twice");
  Entry* e = add(ip);
  if (e == nullptr) return Status::error("more than " + std::to_string(kCapacity) + " neighbors");
  e->fixed = true;  // before the MAC: a reader that sees it resolved sees it fixed
  e->mac.store(pack(mac), std::memory_order_release);
  return Status::success();
}

bool NeighborTable::learn(const roce::IpAddr& ip, const MacAddr& mac) {
  Entry* e = find(ip);
  if (e == nullptr || e->fixed) return false;
  const uint64_t bits = pack(mac);
  return e->mac.exchange(bits, std::memory_order_acq_rel) != bits;
}

uint64_t NeighborTable::pack(const MacAddr& mac) {
  uint64_t v = kResolved;
  for (uint8_t b : mac) v = (v & kResolved) | (v & ~kResolved) << 8 | b;
  return v;
}

MacAddr NeighborTable::unpack(uint64_t bits) {
  MacAddr m;
  for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<uint8_t>(bits >> (8 * (m.size() - 1 - i)));
  return m;
}

std::optional<MacAddr> NeighborTable::mac_of(const Entry& e) {
  const uint64_t bits = e.mac.load(std::memory_order_acquire);
  if ((bits & kResolved) == 0) return std::nullopt;
  return unpack(bits);
}

Result<std::vector<std::pair<roce::IpAddr, MacAddr>>> parse_neighbors(const std::string& text) {
  std::vector<std::pair<roce::IpAddr, MacAddr>> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    const size_t eq = item.find('=');
    const auto ip = eq == std::string::npos ? std::nullopt : parse_ip(item.substr(0, eq));
    const auto mac = eq == std::string::npos ? std::nullopt : parse_mac(item.substr(eq + 1));
    if (!ip || !mac) return Status::error("neighbors entry '" + item + "' is not ip=mac");
    out.emplace_back(*ip, *mac);
    start = end + 1;
  }
  return out;
}

std::string check_neighbors(const std::string& text) {
  return parse_neighbors(text).ok() ? "" : "a list of ip=mac (10.0.0.2=02:00:00:00:00:02,...), or empty";
}

MacAddr ipv6_multicast_mac(const roce::IpAddr& group) {
  return {0x33, 0x33, group.bytes[12], group.bytes[13], group.bytes[14], group.bytes[15]};
}

roce::IpAddr solicited_node(const roce::IpAddr& ip) {
  roce::IpAddr g;
  g.v6 = true;
  g.bytes = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, ip.bytes[13], ip.bytes[14], ip.bytes[15]};
  return g;
}

size_t NeighborResolver::on_frame(std::span<const uint8_t> frame, std::span<uint8_t> reply) {
  if (frame.size() < kEthHeaderBytes || reply.size() < kMaxControlFrameBytes) return 0;
  return load_be16(frame.data() + 12) == kEtherTypeArp ? on_arp(frame, reply) : on_nd(frame, reply);
}

size_t NeighborResolver::on_arp(std::span<const uint8_t> frame, std::span<uint8_t> reply) {
  if (local_.ip.v6 || frame.size() < kEthHeaderBytes + kArpBytes) return 0;
  const uint8_t* a = frame.data() + kEthHeaderBytes;
  if (load_be16(a) != 1 || load_be16(a + 2) != kEtherTypeIpv4 || a[4] != 6 || a[5] != 4) return 0;
  roce::IpAddr sender;
  std::memcpy(sender.bytes.data(), a + 14, 4);
  MacAddr sender_mac;
  std::memcpy(sender_mac.data(), a + 8, 6);
  if (sender == local_.ip) return 0;  // someone else claims our address: not ours to resolve
  table_.learn(sender, sender_mac);
  const uint16_t op = load_be16(a + 6);
  if (op != kArpRequest || std::memcmp(a + 24, local_.ip.bytes.data(), 4) != 0) return 0;
  return write_arp(reply, kArpReply, sender_mac, local_, sender_mac, sender.bytes.data());
}

size_t NeighborResolver::on_nd(std::span<const uint8_t> frame, std::span<uint8_t> reply) {
  if (!local_.ip.v6 || frame.size() < kEthHeaderBytes + roce::kIpv6HeaderBytes + 24) return 0;
  const uint8_t* ip6 = frame.data() + kEthHeaderBytes;
  const size_t len = load_be16(ip6 + 4);
  if (ip6[6] != kIpProtoIcmpv6 || ip6[7] != 255 || len < 24) return 0;  // RFC 4861 7.1.1: hop limit 255
  if (kEthHeaderBytes + roce::kIpv6HeaderBytes + len > frame.size()) return 0;
  const std::span<const uint8_t> icmp(ip6 + roce::kIpv6HeaderBytes, len);
  if (icmp[1] != 0 || icmpv6_checksum(ip6, icmp) != 0) return 0;  // a valid message sums to 0
  const roce::IpAddr src = v6_at(ip6 + 8);
  const roce::IpAddr target = v6_at(icmp.data() + 8);
  MacAddr eth_src;
  std::memcpy(eth_src.data(), frame.data() + 6, 6);
  const std::span<const uint8_t> options = icmp.subspan(24);
  const roce::IpAddr unspecified{true, {}};
  if (icmp[0] == kNa) {
    // A solicited advertisement carries the target's MAC as an option; else take the frame's source.
    table_.learn(target, ll_option(options, kOptTargetLl).value_or(eth_src));
    return 0;
  }
  if (icmp[0] != kNs || target != local_.ip) return 0;
  const auto src_mac = ll_option(options, kOptSourceLl);
  if (src == unspecified) {
    // Duplicate address detection by someone else: answer to all nodes, unsolicited.
    roce::IpAddr all_nodes = unspecified;
    all_nodes.bytes[0] = 0xff;
    all_nodes.bytes[1] = 0x02;
    all_nodes.bytes[15] = 1;
    return write_nd(reply, kNa, kNaOverride, ipv6_multicast_mac(all_nodes), all_nodes, local_, local_.ip);
  }
  if (src_mac) table_.learn(src, *src_mac);
  return write_nd(reply, kNa, kNaSolicited | kNaOverride, src_mac.value_or(eth_src), src, local_, local_.ip);
}

void NeighborResolver::request_lost(NeighborTable::Entry& e) {
  e.next_request_ns.store(0, std::memory_order_relaxed);
  const uint32_t sent = e.requests.load(std::memory_order_relaxed);
  if (sent > 0) e.requests.store(sent - 1, std::memory_order_relaxed);
}

size_t NeighborResolver::request(NeighborTable::Entry& e, int64_t now_ns, std::span<uint8_t> out) {
  if (out.size() < kMaxControlFrameBytes || e.ip.v6 != local_.ip.v6) return 0;
  if ((e.mac.load(std::memory_order_acquire) & NeighborTable::kResolved) != 0) return 0;
  int64_t due = e.next_request_ns.load(std::memory_order_relaxed);
  if (now_ns < due) return 0;
  const uint32_t sent = e.requests.load(std::memory_order_relaxed);
  const uint32_t doublings = sent < kQuickRetries ? 0 : std::min(sent - kQuickRetries + 1, 20u);
  const int64_t wait = std::min(kFirstRetryNs << doublings, kMaxRetryNs);
  if (!e.next_request_ns.compare_exchange_strong(due, now_ns + wait, std::memory_order_relaxed)) return 0;
  e.requests.fetch_add(1, std::memory_order_relaxed);
  if (!local_.ip.v6) return write_arp(out, kArpRequest, kBroadcastMac, local_, MacAddr{}, e.ip.bytes.data());
  const roce::IpAddr group = solicited_node(e.ip);
  return write_nd(out, kNs, 0, ipv6_multicast_mac(group), group, local_, e.ip);
}

}  // namespace rdmad::verbs::dpdk
