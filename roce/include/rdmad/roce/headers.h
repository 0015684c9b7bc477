#pragma once
// RoCEv2 transport headers (IBTA Annex A17 / IB spec chapter 9), host-order views. All fields are
// big-endian on the wire; the codec converts. Sizes are fixed by the spec.
#include <cstddef>
#include <cstdint>

#include "rdmad/roce/opcode.h"

namespace rdmad::roce {

inline constexpr uint16_t kRoceUdpPort = 4791;  // IANA port for RoCEv2
inline constexpr size_t kBthBytes = 12;
inline constexpr size_t kRethBytes = 16;
inline constexpr size_t kAethBytes = 4;
inline constexpr size_t kImmDtBytes = 4;
inline constexpr size_t kIcrcBytes = 4;
inline constexpr size_t kCnpReservedBytes = 16;   // zero bytes between a CNP's BTH and its ICRC
inline constexpr size_t kMaxPayloadBytes = 4096;  // largest path MTU
inline constexpr uint16_t kDefaultPkey = 0xFFFF;  // full-membership default partition
inline constexpr uint32_t kPsnMask = 0xFFFFFF;    // PSNs and QPNs are 24 bits
inline constexpr uint32_t kQpnMask = 0xFFFFFF;

// ECN codepoints: the low two bits of the IPv4 TOS / IPv6 traffic class.
inline constexpr uint8_t kEcnMask = 0x03;
inline constexpr uint8_t kEcnNotEct = 0x00;
inline constexpr uint8_t kEcnEct1 = 0x01;
inline constexpr uint8_t kEcnEct0 = 0x02;  // data packets are sent with ECT(0)
inline constexpr uint8_t kEcnCe = 0x03;
inline constexpr uint8_t kDefaultCnpDscp = 48;  // TOS = DSCP << 2

// Base transport header, 12 bytes:
// opcode(8) | SE(1) M(1) PadCnt(2) TVer(4) | P_Key(16) | FECN(1) BECN(1) resv(6) | DestQP(24) |
// AckReq(1) resv(7) | PSN(24).
struct Bth {
  Opcode opcode = Opcode::kSendOnly;
  bool solicited = false;  // SE
  bool mig_req = false;    // M
  uint8_t pad_count = 0;   // set by the encoder from the payload length
  uint8_t tver = 0;        // transport header version, always 0
  uint16_t pkey = kDefaultPkey;
  bool fecn = false;
  bool becn = false;
  uint32_t dest_qp = 0;  // 24 bits
  bool ack_req = false;
  uint32_t psn = 0;  // 24 bits

  bool operator==(const Bth&) const = default;
};

// RDMA extended transport header (WRITE First/Only, READ request), 16 bytes.
struct Reth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_length = 0;  // bytes of the whole message

  bool operator==(const Reth&) const = default;
};

// AETH syndrome type, bits 6-5 of the syndrome.
enum class AckType : uint8_t { kAck = 0, kRnrNak = 1, kReserved = 2, kNak = 3 };

// NAK codes (low 5 bits of a NAK syndrome).
enum class NakCode : uint8_t {
  kPsnSequenceError = 0x00,
  kInvalidRequest = 0x01,
  kRemoteAccessError = 0x02,
  kRemoteOperationalError = 0x03,
  kInvalidRdRequest = 0x04,
};

inline constexpr uint8_t kAckCreditInvalid = 0x1F;  // "no credit count" in an ACK syndrome

// ACK extended transport header, 4 bytes: syndrome(8) | MSN(24).
struct Aeth {
  uint8_t syndrome = 0;
  uint32_t msn = 0;  // 24 bits

  constexpr AckType type() const { return static_cast<AckType>((syndrome >> 5) & 0x3); }
  // Credit count (ACK), RNR timer code (RNR NAK) or NAK code (NAK): the low 5 bits.
  constexpr uint8_t value() const { return syndrome & 0x1F; }
  constexpr NakCode nak_code() const { return static_cast<NakCode>(value()); }

  static constexpr Aeth ack(uint32_t msn, uint8_t credit = kAckCreditInvalid) {
    return {static_cast<uint8_t>(credit & 0x1F), msn & 0xFFFFFF};
  }
  static constexpr Aeth rnr_nak(uint32_t msn, uint8_t rnr_timer) {
    return {static_cast<uint8_t>(0x20 | (rnr_timer & 0x1F)), msn & 0xFFFFFF};
  }
  static constexpr Aeth nak(uint32_t msn, NakCode code) {
    return {static_cast<uint8_t>(0x60 | static_cast<uint8_t>(code)), msn & 0xFFFFFF};
  }

  bool operator==(const Aeth&) const = default;
};

// Writes a header in wire format to `out` (which must hold kBthBytes / kRethBytes / kAethBytes).
void write_bth(const Bth& bth, uint8_t* out);
void write_reth(const Reth& reth, uint8_t* out);
void write_aeth(const Aeth& aeth, uint8_t* out);
// Reads a header in wire format. read_bth stores the raw opcode byte without validating it.
Bth read_bth(const uint8_t* in);
Reth read_reth(const uint8_t* in);
Aeth read_aeth(const uint8_t* in);

// 24-bit PSN arithmetic (IB spec 9.7.1: PSNs wrap modulo 2^24).
constexpr uint32_t psn_add(uint32_t psn, uint32_t n) { return (psn + n) & kPsnMask; }
// Signed distance a - b in the 24-bit circle, in [-2^23, 2^23).
constexpr int32_t psn_diff(uint32_t a, uint32_t b) {
  uint32_t d = (a - b) & kPsnMask;
  return d >= 0x800000u ? static_cast<int32_t>(d) - 0x1000000 : static_cast<int32_t>(d);
}

}  // namespace rdmad::roce
