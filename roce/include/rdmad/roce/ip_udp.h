#pragma once
// The IP and UDP fields around a RoCEv2 packet. A datagram sent over a UDP socket never shows its
// IP header to the sender, so the invariant ICRC is computed from this description instead; a full
// frame (tshark captures, the golden vector, the fabric tests) is encoded from it too.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>

#include "rdmad/roce/crc32.h"

#include "rdmad/roce/headers.h"

namespace rdmad::roce {

// An IPv4 or IPv6 address in network byte order. IPv4 uses bytes[0..3].
struct IpAddr {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};

  // From a host-order IPv4 address (0x16161608 is 22.22.22.8).
  static constexpr IpAddr v4(uint32_t host_order) {
    IpAddr a;
    a.bytes[0] = static_cast<uint8_t>(host_order >> 24);
    a.bytes[1] = static_cast<uint8_t>(host_order >> 16);
    a.bytes[2] = static_cast<uint8_t>(host_order >> 8);
    a.bytes[3] = static_cast<uint8_t>(host_order);
    return a;
  }
  // From 16 network-order bytes.
  static constexpr IpAddr from_v6(const std::array<uint8_t, 16>& b) {
    IpAddr a;
    a.v6 = true;
    a.bytes = b;
    return a;
  }
  bool operator==(const IpAddr&) const = default;
};

// Linux sends datagrams of an unconnected UDP socket with IP_PMTUDISC_DO (DF set) with IP id 0
// (ip_select_ident), so those are the defaults: a soft endpoint that sets IP_PMTUDISC_DO and
// describes its packets with the defaults computes the same ICRC a capture of the wire would show.
// Other RoCEv2 senders put real ids there, and the ICRC covers them: rxe takes each packet's id
// from the kernel's per-destination id generator (__ip_select_ident), hardware NICs from their own
// counters. A UDP socket's receiver never sees the id: it describes the packet with
// ip_id_known = false, and the ICRC check then accepts the one id that makes the ICRC match.
struct IpUdpInfo {
  IpAddr src;  // src.v6 decides the IP version; dst must match it
  IpAddr dst;
  uint16_t src_port = 49152;  // RoCEv2 puts ECMP entropy here (49152-65535)
  uint16_t dst_port = kRoceUdpPort;
  uint8_t tos = kEcnEct0;     // IPv4 TOS or IPv6 traffic class (masked out of the ICRC)
  uint8_t ttl = 64;           // IPv4 TTL or IPv6 hop limit (masked out of the ICRC)
  uint16_t ip_id = 0;         // IPv4 identification (covered by the ICRC)
  bool ip_id_known = true;    // IPv4: false where the id cannot be seen (see icrc_matches)
  bool dont_fragment = true;  // IPv4 DF flag (covered by the ICRC)
  uint32_t flow_label = 0;    // IPv6 flow label, 20 bits (masked out of the ICRC)

  bool operator==(const IpUdpInfo&) const = default;
};

inline constexpr size_t kIpv4HeaderBytes = 20;
inline constexpr size_t kIpv6HeaderBytes = 40;
inline constexpr size_t kUdpHeaderBytes = 8;

// Bytes of IP + UDP header in front of the transport for this address family.
constexpr size_t ip_udp_header_bytes(const IpUdpInfo& ip) {
  return (ip.src.v6 ? kIpv6HeaderBytes : kIpv4HeaderBytes) + kUdpHeaderBytes;
}

// The invariant CRC (IBTA A17.8) of a RoCEv2 packet: CRC-32 over 8 bytes of 0xFF, the IP header
// with TOS/TTL/checksum (IPv4) or traffic class/flow label/hop limit (IPv6) set to ones, the UDP
// header with checksum 0xFFFF, the BTH with byte 4 (FECN/BECN/resv) set to 0xFF, and the rest of
// the transport. `transport` is the UDP payload WITHOUT the trailing 4 ICRC bytes; lengths in the
// pseudo-header count them. The result is the value whose least significant byte goes first on the
// wire (see store_icrc).
uint32_t compute_icrc(const IpUdpInfo& ip, std::span<const uint8_t> transport);
// The same over a transport held in pieces: `head` (at least the BTH), then `rest` in order.
uint32_t compute_icrc(const IpUdpInfo& ip, std::span<const uint8_t> head,
                      std::initializer_list<std::span<const uint8_t>> rest);
// The same over `head`, a payload known only by its CRC-32 (crc32_update(0, payload)) and length
// (`shift`, built for payload bytes), then `tail`: the payload itself is not read.
uint32_t compute_icrc(const IpUdpInfo& ip, std::span<const uint8_t> head, uint32_t payload_crc,
                      const Crc32Shift& shift, std::span<const uint8_t> tail);

// Whether `received` (from the wire) is the ICRC of a transport of `transport_bytes` (ICRC
// excluded) whose ICRC computed from `ip` is `computed`. Equal values match. With ip.ip_id_known
// false an IPv4 packet also matches when another IP id alone explains the difference: the ICRC is
// linear in the id's 16 bits, so that id is solved for (crc32_solve_be16), not searched. The price:
// a packet corrupted elsewhere passes with probability 2^-16 instead of 2^-32 (what a UDP checksum
// gives; the link's FCS still checks every hop). Packets with the id assumed (0: soft senders) cost
// one compare as before.
bool icrc_matches(const IpUdpInfo& ip, size_t transport_bytes, uint32_t computed, uint32_t received);

// Writes / reads an ICRC in wire order (least significant byte first).
void store_icrc(uint32_t icrc, uint8_t* out);
uint32_t load_icrc(const uint8_t* in);

}  // namespace rdmad::roce
