#include "frame.h"

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>

namespace rdmad::verbs::dpdk {
namespace {

constexpr size_t kBthBytes = 12;
constexpr uint8_t kNeighborSolicitation = 135;
constexpr uint8_t kNeighborAdvertisement = 136;

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Whether an Ethernet destination reaches this NIC: its own MAC, or (for ARP and neighbour
// discovery only) broadcast and multicast.
bool is_unicast_to(const uint8_t* dst, const MacAddr& mac) { return std::memcmp(dst, mac.data(), mac.size()) == 0; }
bool is_group(const uint8_t* dst) { return (dst[0] & 1) != 0; }

RxFrame classify_ipv4(std::span<const uint8_t> l3, const LinkAddress& local) {
  RxFrame r;
  if (local.ip.v6 || l3.size() < roce::kIpv4HeaderBytes || l3[0] != 0x45) return r;  // options: not RoCEv2
  const size_t total = load_be16(l3.data() + 2);
  if (total < roce::kIpv4HeaderBytes + roce::kUdpHeaderBytes || total > l3.size()) return r;
  if (std::memcmp(l3.data() + 16, local.ip.bytes.data(), 4) != 0) return r;
  if (ipv4_header_checksum(l3.data()) != load_be16(l3.data() + 10)) {
    r.kind = FrameKind::kBadIpChecksum;
    return r;
  }
  const uint16_t frag = load_be16(l3.data() + 6);
  if ((frag & 0x3FFF) != 0 || l3[9] != kIpProtoUdp) return r;  // a fragment, or not UDP
  const uint8_t* udp = l3.data() + roce::kIpv4HeaderBytes;
  const size_t udp_len = load_be16(udp + 4);
  if (udp_len != total - roce::kIpv4HeaderBytes || udp_len < roce::kUdpHeaderBytes + kBthBytes) return r;
  if (load_be16(udp + 2) != local.udp_port) return r;
  roce::IpUdpInfo& ip = r.ip;
  std::memcpy(ip.src.bytes.data(), l3.data() + 12, 4);
  std::memcpy(ip.dst.bytes.data(), l3.data() + 16, 4);
  ip.src_port = load_be16(udp);
  ip.dst_port = local.udp_port;
  ip.tos = l3[1];
  ip.ttl = l3[8];
  ip.ip_id = load_be16(l3.data() + 4);
  ip.ip_id_known = true;
  ip.dont_fragment = (frag & 0x4000) != 0;
  ip.flow_label = 0;
  r.datagram = l3.subspan(roce::kIpv4HeaderBytes + roce::kUdpHeaderBytes, udp_len - roce::kUdpHeaderBytes);
  r.kind = FrameKind::kRoce;
  return r;
}

RxFrame classify_ipv6(std::span<const uint8_t> l3, const uint8_t* eth_dst, const LinkAddress& local) {
  RxFrame r;
  if (!local.ip.v6 || l3.size() < roce::kIpv6HeaderBytes || (l3[0] >> 4) != 6) return r;
  const size_t payload = load_be16(l3.data() + 4);
  if (roce::kIpv6HeaderBytes + payload > l3.size()) return r;
  const uint8_t next = l3[6];
  if (next == kIpProtoIcmpv6 && payload >= 4 && (is_unicast_to(eth_dst, local.mac) || is_group(eth_dst))) {
    const uint8_t type = l3[roce::kIpv6HeaderBytes];
    if (type == kNeighborSolicitation || type == kNeighborAdvertisement) r.kind = FrameKind::kNeighborDiscovery;
    return r;
  }
  if (next != kIpProtoUdp || !is_unicast_to(eth_dst, local.mac)) return r;
  if (std::memcmp(l3.data() + 24, local.ip.bytes.data(), 16) != 0) return r;
  const uint8_t* udp = l3.data() + roce::kIpv6HeaderBytes;
  const size_t udp_len = load_be16(udp + 4);
  if (udp_len != payload || udp_len < roce::kUdpHeaderBytes + kBthBytes) return r;
  if (load_be16(udp + 2) != local.udp_port) return r;
  roce::IpUdpInfo& ip = r.ip;
  ip.src.v6 = ip.dst.v6 = true;
  std::memcpy(ip.src.bytes.data(), l3.data() + 8, 16);
  std::memcpy(ip.dst.bytes.data(), l3.data() + 24, 16);
  ip.src_port = load_be16(udp);
  ip.dst_port = local.udp_port;
  const uint32_t w0 = (static_cast<uint32_t>(load_be16(l3.data())) << 16) | load_be16(l3.data() + 2);
  ip.tos = static_cast<uint8_t>(w0 >> 20);
  ip.flow_label = w0 & 0xFFFFF;
  ip.ttl = l3[7];
  ip.ip_id = 0;
  ip.ip_id_known = true;
  ip.dont_fragment = true;
  r.datagram = l3.subspan(roce::kIpv6HeaderBytes + roce::kUdpHeaderBytes, udp_len - roce::kUdpHeaderBytes);
  r.kind = FrameKind::kRoce;
  return r;
}

}  // namespace

std::optional<MacAddr> parse_mac(std::string_view text) {
  MacAddr mac{};
  if (text.size() != 17) return std::nullopt;
  for (size_t i = 0; i < mac.size(); ++i) {
    const int hi = hex_digit(text[3 * i]);
    const int lo = hex_digit(text[3 * i + 1]);
    if (hi < 0 || lo < 0 || (i < 5 && text[3 * i + 2] != ':')) return std::nullopt;
    mac[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return mac;
}

std::string mac_string(const MacAddr& m) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return buf;
}

std::optional<roce::IpAddr> parse_ip(std::string_view text) {
  const std::string s(text);
  roce::IpAddr a;
  if (inet_pton(AF_INET, s.c_str(), a.bytes.data()) == 1) return a;
  a.v6 = true;
  if (inet_pton(AF_INET6, s.c_str(), a.bytes.data()) == 1) return a;
  return std::nullopt;
}

std::string ip_string(const roce::IpAddr& ip) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(ip.v6 ? AF_INET6 : AF_INET, ip.bytes.data(), buf, sizeof buf);
  return buf;
}

void InetChecksum::add(std::span<const uint8_t> b) {
  size_t i = 0;
  if (odd_ && !b.empty()) {
    sum_ += b[0];
    i = 1;
    odd_ = false;
  }
  for (; i + 1 < b.size(); i += 2) sum_ += static_cast<uint32_t>(b[i]) << 8 | b[i + 1];
  if (i < b.size()) {
    sum_ += static_cast<uint32_t>(b[i]) << 8;
    odd_ = true;
  }
}

uint16_t InetChecksum::value() const {
  uint64_t s = sum_;
  while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
  return static_cast<uint16_t>(~s);
}

uint16_t ipv4_header_checksum(const uint8_t* header) {
  InetChecksum c;
  c.add({header, 10});  // the checksum field itself counts as 0
  c.add({header + 12, roce::kIpv4HeaderBytes - 12});
  return c.value();
}

void PathHeader::set_dst_mac(const MacAddr& mac) { std::memcpy(bytes.data(), mac.data(), mac.size()); }

PathHeader make_path_header(const MacAddr& src, const MacAddr& dst, const roce::IpUdpInfo& ip) {
  PathHeader h;
  h.v6 = ip.src.v6;
  uint8_t* b = h.bytes.data();
  std::memcpy(b, dst.data(), 6);
  std::memcpy(b + 6, src.data(), 6);
  store_be16(b + 12, h.v6 ? kEtherTypeIpv6 : kEtherTypeIpv4);
  uint8_t* l3 = b + kEthHeaderBytes;
  uint8_t* udp;
  if (h.v6) {
    l3[0] = 0x60;
    l3[1] = static_cast<uint8_t>((ip.flow_label >> 16) & 0x0F);
    store_be16(l3 + 2, static_cast<uint16_t>(ip.flow_label));
    l3[6] = kIpProtoUdp;
    l3[7] = ip.ttl;
    std::memcpy(l3 + 8, ip.src.bytes.data(), 16);
    std::memcpy(l3 + 24, ip.dst.bytes.data(), 16);
    udp = l3 + roce::kIpv6HeaderBytes;
  } else {
    l3[0] = 0x45;
    store_be16(l3 + 6, 0x4000);  // DF, id 0 (bytes 4-5 stay 0)
    l3[8] = ip.ttl;
    l3[9] = kIpProtoUdp;
    std::memcpy(l3 + 12, ip.src.bytes.data(), 4);
    std::memcpy(l3 + 16, ip.dst.bytes.data(), 4);
    udp = l3 + roce::kIpv4HeaderBytes;
  }
  store_be16(udp, ip.src_port);
  store_be16(udp + 2, ip.dst_port);
  return h;
}

void write_frame_header(const PathHeader& h, size_t datagram_bytes, uint8_t tos, uint8_t* out) {
  std::memcpy(out, h.bytes.data(), h.size());
  uint8_t* l3 = out + kEthHeaderBytes;
  const auto udp_len = static_cast<uint16_t>(roce::kUdpHeaderBytes + datagram_bytes);
  if (h.v6) {
    // Version 6, then the traffic class across the nibble boundary, then the flow label.
    l3[0] = static_cast<uint8_t>(0x60 | tos >> 4);
    l3[1] = static_cast<uint8_t>((tos & 0x0F) << 4 | (l3[1] & 0x0F));
    store_be16(l3 + 4, udp_len);
    store_be16(l3 + roce::kIpv6HeaderBytes + 4, udp_len);
    return;
  }
  l3[1] = tos;
  store_be16(l3 + 2, static_cast<uint16_t>(roce::kIpv4HeaderBytes + udp_len));
  store_be16(l3 + 10, ipv4_header_checksum(l3));
  store_be16(l3 + roce::kIpv4HeaderBytes + 4, udp_len);
}

void finish_udp6_checksum(uint8_t* frame, std::initializer_list<std::span<const uint8_t>> datagram) {
  const uint8_t* l3 = frame + kEthHeaderBytes;
  uint8_t* udp = frame + kEthHeaderBytes + roce::kIpv6HeaderBytes;
  InetChecksum c;
  c.add({l3 + 8, 32});      // source and destination addresses
  c.add16(load_be16(udp + 4));  // the upper-layer length (the UDP length: it fits 16 bits)
  c.add16(kIpProtoUdp);
  store_be16(udp + 6, 0);
  c.add({udp, roce::kUdpHeaderBytes});
  for (std::span<const uint8_t> piece : datagram) c.add(piece);
  const uint16_t sum = c.value();
  store_be16(udp + 6, sum == 0 ? 0xFFFF : sum);  // RFC 8200 8.1: 0 is sent as all ones
}

RxFrame classify_frame(std::span<const uint8_t> frame, const LinkAddress& local) {
  if (frame.size() < kEthHeaderBytes) return {};
  const uint8_t* dst = frame.data();
  const std::span<const uint8_t> l3 = frame.subspan(kEthHeaderBytes);
  switch (load_be16(frame.data() + 12)) {
    case kEtherTypeIpv4: return is_unicast_to(dst, local.mac) ? classify_ipv4(l3, local) : RxFrame{};
    case kEtherTypeIpv6: return classify_ipv6(l3, dst, local);
    case kEtherTypeArp: {
      RxFrame r;
      if (!local.ip.v6 && (is_unicast_to(dst, local.mac) || is_group(dst))) r.kind = FrameKind::kArp;
      return r;
    }
    default: return {};
  }
}

uint16_t source_port_for(uint32_t qpn, uint32_t dest_qpn) {
  // The mix UdpQueue::source_for uses to pick a socket, here taken straight to a port.
  uint64_t v = (static_cast<uint64_t>(qpn) << 32 | dest_qpn) * 0x9E3779B97F4A7C15ull;
  v ^= v >> 29;
  return static_cast<uint16_t>(49152 + (v >> 32) % 16384);
}

}  // namespace rdmad::verbs::dpdk
