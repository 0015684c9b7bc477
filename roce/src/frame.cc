// The whole-frame layer: IPv4/IPv6 + UDP around a datagram.
#include <cstring>

#include "bytes.h"
#include "rdmad/roce/packet.h"

namespace rdmad::roce {

using detail::load_be16;
using detail::load_be32;
using detail::store_be16;
using detail::store_be32;

namespace {

constexpr uint8_t kIpProtoUdp = 17;

// RFC 1071 one's-complement sum, not yet folded or inverted.
uint32_t ones_sum(const uint8_t* p, size_t n, uint32_t sum) {
  for (; n >= 2; p += 2, n -= 2) sum += load_be16(p);
  if (n == 1) sum += static_cast<uint32_t>(p[0]) << 8;
  return sum;
}

uint16_t fold(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

void write_ipv4(const IpUdpInfo& ip, size_t total, uint8_t* h) {
  h[0] = 0x45;
  h[1] = ip.tos;
  store_be16(h + 2, static_cast<uint16_t>(total));
  store_be16(h + 4, ip.ip_id);
  store_be16(h + 6, ip.dont_fragment ? 0x4000 : 0);
  h[8] = ip.ttl;
  h[9] = kIpProtoUdp;
  store_be16(h + 10, 0);
  std::memcpy(h + 12, ip.src.bytes.data(), 4);
  std::memcpy(h + 16, ip.dst.bytes.data(), 4);
  store_be16(h + 10, fold(ones_sum(h, kIpv4HeaderBytes, 0)));
}

void write_ipv6(const IpUdpInfo& ip, size_t payload, uint8_t* h) {
  store_be32(h, (6u << 28) | (static_cast<uint32_t>(ip.tos) << 20) | (ip.flow_label & 0xFFFFF));
  store_be16(h + 4, static_cast<uint16_t>(payload));
  h[6] = kIpProtoUdp;
  h[7] = ip.ttl;
  std::memcpy(h + 8, ip.src.bytes.data(), 16);
  std::memcpy(h + 24, ip.dst.bytes.data(), 16);
}

// UDP over IPv6 must carry a checksum (RFC 8200 8.1); over IPv4 RoCEv2 sends 0.
uint16_t udp6_checksum(const IpUdpInfo& ip, const uint8_t* udp, size_t udp_len) {
  uint32_t sum = ones_sum(ip.src.bytes.data(), 16, 0);
  sum = ones_sum(ip.dst.bytes.data(), 16, sum);
  sum += static_cast<uint32_t>(udp_len) + kIpProtoUdp;
  sum = ones_sum(udp, udp_len, sum);
  const uint16_t c = fold(sum);
  return c == 0 ? 0xFFFF : c;
}

struct L4 {
  DecodeError error = DecodeError::kOk;
  std::span<const uint8_t> udp;
};

L4 parse_ip(std::span<const uint8_t> f, IpUdpInfo& info) {
  if (f.empty()) return {DecodeError::kTruncatedIp, {}};
  const uint8_t version = f[0] >> 4;
  if (version == 4) {
    if (f.size() < kIpv4HeaderBytes) return {DecodeError::kTruncatedIp, {}};
    // RoCEv2 never sends IPv4 options; the ICRC pseudo-header has no room for them.
    if ((f[0] & 0xF) != 5) return {DecodeError::kBadIpHeader, {}};
    const size_t total = load_be16(f.data() + 2);
    if (total < kIpv4HeaderBytes) return {DecodeError::kBadIpHeader, {}};
    if (total > f.size()) return {DecodeError::kTruncatedIp, {}};
    const uint16_t frag = load_be16(f.data() + 6);
    if ((frag & 0x3FFF) != 0) return {DecodeError::kBadIpHeader, {}};  // MF or an offset
    if (f[9] != kIpProtoUdp) return {DecodeError::kNotUdp, {}};
    info.src = IpAddr{};
    info.dst = IpAddr{};
    std::memcpy(info.src.bytes.data(), f.data() + 12, 4);
    std::memcpy(info.dst.bytes.data(), f.data() + 16, 4);
    info.tos = f[1];
    info.ttl = f[8];
    info.ip_id = load_be16(f.data() + 4);
    info.dont_fragment = (frag & 0x4000) != 0;
    info.flow_label = 0;
    return {DecodeError::kOk, f.subspan(kIpv4HeaderBytes, total - kIpv4HeaderBytes)};
  }
  if (version == 6) {
    if (f.size() < kIpv6HeaderBytes) return {DecodeError::kTruncatedIp, {}};
    const size_t payload = load_be16(f.data() + 4);
    if (kIpv6HeaderBytes + payload > f.size()) return {DecodeError::kTruncatedIp, {}};
    if (f[6] != kIpProtoUdp) return {DecodeError::kNotUdp, {}};  // extension headers unsupported
    const uint32_t w0 = load_be32(f.data());
    info.src = IpAddr{};
    info.src.v6 = true;
    info.dst = info.src;
    std::memcpy(info.src.bytes.data(), f.data() + 8, 16);
    std::memcpy(info.dst.bytes.data(), f.data() + 24, 16);
    info.tos = static_cast<uint8_t>(w0 >> 20);
    info.flow_label = w0 & 0xFFFFF;
    info.ttl = f[7];
    info.ip_id = 0;
    info.dont_fragment = true;
    return {DecodeError::kOk, f.subspan(kIpv6HeaderBytes, payload)};
  }
  return {DecodeError::kBadIpVersion, {}};
}

DecodeError decode(std::span<const uint8_t> frame, IpUdpInfo& info, Packet* pkt, uint16_t udp_port) {
  const L4 l4 = parse_ip(frame, info);
  if (l4.error != DecodeError::kOk) return l4.error;
  if (l4.udp.size() < kUdpHeaderBytes) return DecodeError::kTruncatedUdp;
  const size_t udp_len = load_be16(l4.udp.data() + 4);
  if (udp_len != l4.udp.size()) return DecodeError::kBadUdpLength;
  info.src_port = load_be16(l4.udp.data());
  info.dst_port = load_be16(l4.udp.data() + 2);
  if (udp_port != 0 && info.dst_port != udp_port) return DecodeError::kWrongUdpPort;
  return decode_datagram(l4.udp.subspan(kUdpHeaderBytes), &info, pkt, nullptr);
}

}  // namespace

size_t encode_frame(const IpUdpInfo& ip, const Packet& pkt, std::span<uint8_t> out) {
  const size_t head = ip_udp_header_bytes(ip);
  if (out.size() < head) return 0;
  const size_t n = encode_datagram(ip, pkt, out.subspan(head));
  if (n == 0) return 0;
  uint8_t* udp = out.data() + head - kUdpHeaderBytes;
  const size_t udp_len = kUdpHeaderBytes + n;
  store_be16(udp, ip.src_port);
  store_be16(udp + 2, ip.dst_port);
  store_be16(udp + 4, static_cast<uint16_t>(udp_len));
  store_be16(udp + 6, 0);
  if (ip.src.v6) {
    write_ipv6(ip, udp_len, out.data());
    store_be16(udp + 6, udp6_checksum(ip, udp, udp_len));
  } else {
    write_ipv4(ip, kIpv4HeaderBytes + udp_len, out.data());
  }
  return head + n;
}

DecodeError decode_frame(std::span<const uint8_t> frame, IpUdpInfo* ip, Packet* pkt, DecodeCounters* counters,
                         uint16_t udp_port) {
  IpUdpInfo info;
  const DecodeError e = decode(frame, info, pkt, udp_port);
  if (e == DecodeError::kOk) *ip = info;
  if (counters != nullptr) counters->record(e);
  return e;
}

}  // namespace rdmad::roce
