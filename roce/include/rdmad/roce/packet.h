#pragma once
// Encoding and decoding of whole RoCEv2 packets. Zero allocation: encoders write into a caller
// buffer and return the byte count (0 on failure); decoders fill a Packet whose payload is a view
// into the input buffer. The decoder trusts nothing: every way a packet can be malformed maps to
// its own DecodeError and is counted in DecodeCounters.
//
// Two layers:
//  - datagram: the UDP payload, BTH ... payload, pad, ICRC. What a UDP socket sends and receives;
//    the ICRC is computed from an IpUdpInfo describing the IP/UDP headers the kernel adds.
//  - frame: a whole IPv4/IPv6 + UDP + datagram packet (captures, the golden vector, tests).
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "rdmad/roce/headers.h"
#include "rdmad/roce/ip_udp.h"
#include "rdmad/roce/opcode.h"

namespace rdmad::roce {

// One RoCEv2 packet. Which of reth/aeth/imm_data are meaningful is given by opcode_info(bth.opcode);
// the encoder ignores the others, the decoder leaves them default-initialised.
struct Packet {
  Bth bth;
  Reth reth;
  Aeth aeth;
  uint32_t imm_data = 0;             // host order value of the 4 ImmDt bytes (big-endian on wire)
  std::span<const uint8_t> payload;  // without pad bytes; for a CNP its 16 reserved bytes
};

// A CNP (A17.9.3) for `dest_qp`: opcode 0x81, BECN set, P_Key 0xFFFF, PSN 0.
Packet make_cnp(uint32_t dest_qp);

enum class DecodeError : uint8_t {
  kOk = 0,
  kTruncatedIp,          // shorter than the IP header, or than its total/payload length
  kBadIpVersion,         // neither 4 nor 6
  kBadIpHeader,          // IHL < 5, IPv4 fragment
  kNotUdp,               // IP protocol / next header is not UDP
  kTruncatedUdp,         // shorter than a UDP header
  kBadUdpLength,         // UDP length disagrees with the IP length
  kWrongUdpPort,         // destination port is not the expected RoCEv2 port
  kTruncatedBth,         // fewer than 12 + 4 (ICRC) bytes
  kUnknownOpcode,        // opcode not in the table
  kBadTransportVersion,  // TVer != 0
  kTruncatedExtHeader,   // too short for the RETH/AETH/ImmDt the opcode carries
  kBadPadCount,          // pad on an opcode that takes none, or more pad than payload
  kBadLength,            // payload length not allowed for the opcode, not 4-aligned, > 4096
  kIcrcMismatch,         // ICRC does not match the packet
  kCount,
};

// Lower-case name of an error ("icrc mismatch", ...).
const char* decode_error_name(DecodeError e);

// Plain per-thread counters; the owner exports them.
struct DecodeCounters {
  uint64_t decoded = 0;                                                     // packets that decoded with kOk
  std::array<uint64_t, static_cast<size_t>(DecodeError::kCount)> errors{};  // indexed by DecodeError

  uint64_t count(DecodeError e) const { return errors[static_cast<size_t>(e)]; }
  uint64_t total_errors() const;
  void record(DecodeError e) {
    if (e == DecodeError::kOk) {
      ++decoded;
    } else {
      ++errors[static_cast<size_t>(e)];
    }
  }
};

// Bytes a datagram for `pkt` takes (headers + payload + pad + ICRC), 0 if the opcode is unknown.
size_t datagram_bytes(const Packet& pkt);

// Encodes the UDP payload of `pkt` into `out`, computing the ICRC from `ip`. Sets PadCnt from the
// payload length; writes 16 zero bytes for a CNP. Returns the bytes written, or 0 if the opcode is
// unknown, the payload is not allowed for the opcode, or `out` is too small.
size_t encode_datagram(const IpUdpInfo& ip, const Packet& pkt, std::span<uint8_t> out);

// A datagram encoded around its payload instead of with it: `out` holds the headers (head_bytes)
// followed by the pad and ICRC (tail_bytes); the payload stays where `pkt.payload` points. On the
// wire the datagram is head, payload, tail (three iovecs), so a sender need not copy the payload.
struct GatherEncoding {
  size_t head_bytes = 0;
  size_t tail_bytes = 0;
};
// Encodes `pkt` that way; the ICRC covers the payload in place. Returns {0, 0} where
// encode_datagram returns 0, and for a CNP (its payload is not the caller's memory).
GatherEncoding encode_datagram_gather(const IpUdpInfo& ip, const Packet& pkt, std::span<uint8_t> out);
// The same with the payload's CRC-32 already known (crc32_update(0, pkt.payload)) and `shift` built
// for pkt.payload.size(): the ICRC is combined from it and the payload is not read here.
GatherEncoding encode_datagram_gather(const IpUdpInfo& ip, const Packet& pkt, std::span<uint8_t> out,
                                      uint32_t payload_crc, const Crc32Shift& shift);

// Recomputes and stores the ICRC of an encoded datagram (e.g. after changing the BTH in place).
void seal_datagram(const IpUdpInfo& ip, std::span<uint8_t> datagram);

// Decodes a UDP payload into `pkt`. When `ip` is non-null the ICRC is verified against it (with
// any IPv4 id when ip->ip_id_known is false: icrc_matches); with nullptr it is not checked. Counts the outcome in `counters` when non-null.
DecodeError decode_datagram(std::span<const uint8_t> datagram, const IpUdpInfo* ip, Packet* pkt,
                            DecodeCounters* counters = nullptr);

// Encodes a whole IPv4 (checksum computed, UDP checksum 0) or IPv6 (UDP checksum computed) frame.
// Returns the bytes written or 0 (as encode_datagram).
size_t encode_frame(const IpUdpInfo& ip, const Packet& pkt, std::span<uint8_t> out);

// Decodes a whole IPv4/IPv6 frame, filling `ip` (addresses, ports, TOS, TTL, id, DF, flow label)
// and `pkt`, verifying the ICRC. `udp_port` is the expected destination port (0 accepts any).
DecodeError decode_frame(std::span<const uint8_t> frame, IpUdpInfo* ip, Packet* pkt,
                         DecodeCounters* counters = nullptr, uint16_t udp_port = kRoceUdpPort);

}  // namespace rdmad::roce
