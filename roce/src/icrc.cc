#include <algorithm>
#include <cstring>

#include "bytes.h"
#include "rdmad/roce/crc32.h"
#include "rdmad/roce/ip_udp.h"

namespace rdmad::roce {

using detail::store_be16;

namespace {

constexpr uint8_t kIpProtoUdp = 17;

// Writes the masked IPv4/IPv6 + UDP pseudo-header (IBTA A17.8.1/A17.8.2) and returns its length.
size_t write_masked_ip_udp(const IpUdpInfo& ip, size_t udp_payload_bytes, uint8_t* out) {
  const auto udp_len = static_cast<uint16_t>(kUdpHeaderBytes + udp_payload_bytes);
  size_t n;
  if (ip.src.v6) {
    out[0] = 0x6F;  // version 6, traffic class and flow label all ones
    out[1] = 0xFF;
    out[2] = 0xFF;
    out[3] = 0xFF;
    store_be16(out + 4, udp_len);
    out[6] = kIpProtoUdp;
    out[7] = 0xFF;  // hop limit
    std::memcpy(out + 8, ip.src.bytes.data(), 16);
    std::memcpy(out + 24, ip.dst.bytes.data(), 16);
    n = kIpv6HeaderBytes;
  } else {
    out[0] = 0x45;
    out[1] = 0xFF;  // TOS
    store_be16(out + 2, static_cast<uint16_t>(kIpv4HeaderBytes + udp_len));
    store_be16(out + 4, ip.ip_id);
    store_be16(out + 6, ip.dont_fragment ? 0x4000 : 0);
    out[8] = 0xFF;  // TTL
    out[9] = kIpProtoUdp;
    out[10] = 0xFF;  // header checksum
    out[11] = 0xFF;
    std::memcpy(out + 12, ip.src.bytes.data(), 4);
    std::memcpy(out + 16, ip.dst.bytes.data(), 4);
    n = kIpv4HeaderBytes;
  }
  uint8_t* udp = out + n;
  store_be16(udp, ip.src_port);
  store_be16(udp + 2, ip.dst_port);
  store_be16(udp + 4, udp_len);
  udp[6] = 0xFF;  // checksum
  udp[7] = 0xFF;
  return n + kUdpHeaderBytes;
}

// The CRC of the pseudo-header and `head` for a transport of `transport_bytes` (ICRC excluded).
uint32_t icrc_over_head(const IpUdpInfo& ip, std::span<const uint8_t> head, size_t transport_bytes) {
  // 8 ones + IPv6 + UDP + BTH fits in 68 bytes.
  uint8_t pseudo[8 + kIpv6HeaderBytes + kUdpHeaderBytes + kBthBytes];
  std::memset(pseudo, 0xFF, 8);
  size_t n = 8 + write_masked_ip_udp(ip, transport_bytes + kIcrcBytes, pseudo + 8);
  const size_t bth = std::min(head.size(), kBthBytes);
  std::memcpy(pseudo + n, head.data(), bth);
  if (bth > 4) pseudo[n + 4] = 0xFF;  // FECN, BECN and reserved bits change in flight
  n += bth;
  return crc32_update(crc32_update(0, {pseudo, n}), head.subspan(bth));
}

}  // namespace

uint32_t compute_icrc(const IpUdpInfo& ip, std::span<const uint8_t> head,
                      std::initializer_list<std::span<const uint8_t>> rest) {
  size_t transport_bytes = head.size();
  for (auto part : rest) transport_bytes += part.size();
  uint32_t crc = icrc_over_head(ip, head, transport_bytes);
  for (auto part : rest) crc = crc32_update(crc, part);
  return crc;
}

uint32_t compute_icrc(const IpUdpInfo& ip, std::span<const uint8_t> head, uint32_t payload_crc,
                      const Crc32Shift& shift, std::span<const uint8_t> tail) {
  const uint32_t crc = icrc_over_head(ip, head, head.size() + shift.length() + tail.size());
  return crc32_update(shift.combine(crc, payload_crc), tail);
}

uint32_t compute_icrc(const IpUdpInfo& ip, std::span<const uint8_t> transport) {
  return compute_icrc(ip, transport, {});
}

bool icrc_matches(const IpUdpInfo& ip, size_t transport_bytes, uint32_t computed, uint32_t received) {
  if (computed == received) return true;
  if (ip.ip_id_known || ip.src.v6) return false;
  // The pseudo-header is 8 bytes of ones, then the IPv4 header, whose id is bytes 4-5: 14 bytes in,
  // followed by the rest of the IPv4 header, the UDP header and the transport.
  constexpr size_t kIdEnd = 8 + 6;
  const uint64_t after = 8 + kIpv4HeaderBytes + kUdpHeaderBytes + transport_bytes - kIdEnd;
  return crc32_solve_be16(computed ^ received, after).has_value();
}

void store_icrc(uint32_t icrc, uint8_t* out) {
  out[0] = static_cast<uint8_t>(icrc);
  out[1] = static_cast<uint8_t>(icrc >> 8);
  out[2] = static_cast<uint8_t>(icrc >> 16);
  out[3] = static_cast<uint8_t>(icrc >> 24);
}

uint32_t load_icrc(const uint8_t* in) {
  return in[0] | (static_cast<uint32_t>(in[1]) << 8) | (static_cast<uint32_t>(in[2]) << 16) |
         (static_cast<uint32_t>(in[3]) << 24);
}

}  // namespace rdmad::roce
