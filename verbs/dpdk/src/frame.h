#pragma once
// The dpdk backend's Ethernet frames, built and parsed without DPDK (so they are unit-tested
// alone): the Ethernet + IPv4/IPv6 + UDP headers the port puts around the engine's datagrams, and
// what a received frame is (RoCEv2 to this NIC, ARP, IPv6 neighbour discovery, anything else).
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "rdmad/roce/ip_udp.h"

namespace rdmad::verbs::dpdk {

using MacAddr = std::array<uint8_t, 6>;
inline constexpr MacAddr kBroadcastMac = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

inline constexpr size_t kEthHeaderBytes = 14;
inline constexpr size_t kMinFrameBytes = 60;  // Ethernet's minimum without the FCS; shorter frames are padded
inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint16_t kEtherTypeIpv6 = 0x86DD;
inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr uint8_t kIpProtoIcmpv6 = 58;

/// "02:00:00:00:00:01" (case-insensitive); nullopt for anything else.
std::optional<MacAddr> parse_mac(std::string_view text);
std::string mac_string(const MacAddr& mac);
/// An IPv4 or IPv6 address ("10.0.0.1", "fd00::1"); nullopt for anything else.
std::optional<roce::IpAddr> parse_ip(std::string_view text);
std::string ip_string(const roce::IpAddr& ip);

/// What this NIC is on its link: its MAC, the address peers send RoCEv2 to, and the UDP port.
struct LinkAddress {
  MacAddr mac{};
  roce::IpAddr ip;
  uint16_t udp_port = 4791;
};

/// Big-endian loads and stores on unaligned bytes.
inline uint16_t load_be16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
inline void store_be16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}

/// The Internet checksum (RFC 1071) over bytes given in pieces of any length.
class InetChecksum {
 public:
  void add(std::span<const uint8_t> bytes);
  void add16(uint16_t v) { sum_ += v; }
  /// The checksum to store (the complement of the folded sum).
  uint16_t value() const;

 private:
  uint64_t sum_ = 0;
  bool odd_ = false;  // an odd number of bytes so far: the next byte is a low-order one
};

/// The header checksum an IPv4 header (20 bytes, its checksum field included) should carry.
uint16_t ipv4_header_checksum(const uint8_t* header);

/// Bytes of Ethernet + IP + UDP header in front of a datagram.
constexpr size_t frame_header_bytes(bool v6) {
  return kEthHeaderBytes + (v6 ? roce::kIpv6HeaderBytes : roce::kIpv4HeaderBytes) + roce::kUdpHeaderBytes;
}
inline constexpr size_t kMaxFrameHeaderBytes = frame_header_bytes(true);

/// The headers of one path's packets: filled when the path opens, completed per packet.
struct PathHeader {
  std::array<uint8_t, kMaxFrameHeaderBytes> bytes{};
  bool v6 = false;

  size_t size() const { return frame_header_bytes(v6); }
  void set_dst_mac(const MacAddr& mac);
};

/// Ethernet from `src` to `dst`, then IPv4 (DF set, id 0, as the engine's ICRC assumes) or IPv6
/// (flow label ip.flow_label), then UDP, with the addresses and ports of `ip` and TTL/hop limit
/// ip.ttl.
PathHeader make_path_header(const MacAddr& src, const MacAddr& dst, const roce::IpUdpInfo& ip);

/// Writes the path's headers for a datagram of `datagram_bytes` sent with TOS (IPv4) or traffic
/// class (IPv6) `tos` into `out` (h.size() bytes): lengths, and the IPv4 header checksum. The UDP
/// checksum is 0, which IPv4 allows; over IPv6 finish_udp6_checksum computes it.
void write_frame_header(const PathHeader& h, size_t datagram_bytes, uint8_t tos, uint8_t* out);

/// IPv6 frames: stores the UDP checksum, over the pseudo-header, the UDP header in `frame` (as
/// write_frame_header left it) and the datagram given in pieces.
void finish_udp6_checksum(uint8_t* frame, std::initializer_list<std::span<const uint8_t>> datagram);

enum class FrameKind : uint8_t {
  kRoce,               // IPv4/IPv6 + UDP to our address and UDP port
  kArp,                // an ARP packet (parse_arp takes it from here)
  kNeighborDiscovery,  // ICMPv6 neighbour solicitation or advertisement
  kBadIpChecksum,      // IPv4 to us whose header checksum is wrong
  kOther,              // anything else: not for us, not RoCEv2, malformed
};

struct RxFrame {
  FrameKind kind = FrameKind::kOther;
  std::span<const uint8_t> datagram;  // kRoce: the UDP payload, BTH to ICRC (at least 16 bytes)
  roce::IpUdpInfo ip;                 // kRoce: every field as the frame carried it, ip_id_known
};

/// Reads a frame taken off the wire. Frames not addressed to `local.mac` (or broadcast, or to the
/// IPv6 multicast MACs for ARP/ND) are kOther.
RxFrame classify_frame(std::span<const uint8_t> frame, const LinkAddress& local);

/// The BTH's destination QP of a datagram of at least 8 bytes.
inline uint32_t datagram_dest_qpn(std::span<const uint8_t> datagram) {
  return (static_cast<uint32_t>(datagram[5]) << 16) | (static_cast<uint32_t>(datagram[6]) << 8) | datagram[7];
}

/// The UDP source port of a QP pair's packets: 49152-65535 (RoCEv2's ECMP entropy) from a hash of
/// both QP numbers, fixed for the pair as hardware derives it from the flow.
uint16_t source_port_for(uint32_t qpn, uint32_t dest_qpn);

}  // namespace rdmad::verbs::dpdk
