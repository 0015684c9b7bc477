#pragma once
// RoCEv2 (IBTA Annex A17) transport opcodes for the reliable-connection service and the CNP, and the
// table of which extension headers each opcode carries. The table is the single source of truth for
// the encoder and the decoder.
#include <cstdint>

namespace rdmad::roce {

enum class Opcode : uint8_t {
  kSendFirst = 0x00,
  kSendMiddle = 0x01,
  kSendLast = 0x02,
  kSendLastImm = 0x03,
  kSendOnly = 0x04,
  kSendOnlyImm = 0x05,
  kWriteFirst = 0x06,
  kWriteMiddle = 0x07,
  kWriteLast = 0x08,
  kWriteLastImm = 0x09,
  kWriteOnly = 0x0A,
  kWriteOnlyImm = 0x0B,
  kReadRequest = 0x0C,
  kReadResponseFirst = 0x0D,
  kReadResponseMiddle = 0x0E,
  kReadResponseLast = 0x0F,
  kReadResponseOnly = 0x10,
  kAcknowledge = 0x11,
  // RoCEv2 congestion notification packet; native InfiniBand uses 0x80 (A17.9.3).
  kCnp = 0x81,
};

// What an opcode puts between the BTH and the ICRC.
enum class PayloadKind : uint8_t {
  kNone,      // no payload, PadCnt must be 0 (READ request, ACK)
  kFull,      // First/Middle: a full path-MTU segment, never empty, PadCnt 0
  kTail,      // Last/Only: 0..MTU bytes plus 0..3 pad bytes
  kCnpZeros,  // CNP: exactly 16 reserved bytes
};

struct OpcodeInfo {
  bool valid = false;  // false for opcodes this codec does not speak (UD, UC, atomics, ...)
  bool reth = false;   // RDMA extended transport header (VA, R_Key, DMA length), 16 bytes
  bool aeth = false;   // ACK extended transport header (syndrome, MSN), 4 bytes
  bool immdt = false;  // immediate data, 4 bytes
  PayloadKind payload = PayloadKind::kNone;
  bool first = false;  // starts a message (First or Only)
  bool last = false;   // ends a message (Last or Only)
};

// The table entry for a raw BTH opcode byte; `valid` is false for anything unknown.
const OpcodeInfo& opcode_info(uint8_t opcode);
inline const OpcodeInfo& opcode_info(Opcode op) { return opcode_info(static_cast<uint8_t>(op)); }

// Human-readable name ("RC RDMA Write First", "CNP", ...); "unknown" for opcodes not in the table.
const char* opcode_name(uint8_t opcode);

// Opcode of one segment of a SEND message, from its position and whether it carries immediate data
// (immediate data rides on the last segment only).
constexpr Opcode send_opcode(bool first, bool last, bool imm) {
  if (first && last) return imm ? Opcode::kSendOnlyImm : Opcode::kSendOnly;
  if (first) return Opcode::kSendFirst;
  if (last) return imm ? Opcode::kSendLastImm : Opcode::kSendLast;
  return Opcode::kSendMiddle;
}

// Opcode of one segment of an RDMA WRITE message (RETH on First/Only, ImmDt on Last/Only).
constexpr Opcode write_opcode(bool first, bool last, bool imm) {
  if (first && last) return imm ? Opcode::kWriteOnlyImm : Opcode::kWriteOnly;
  if (first) return Opcode::kWriteFirst;
  if (last) return imm ? Opcode::kWriteLastImm : Opcode::kWriteLast;
  return Opcode::kWriteMiddle;
}

// Opcode of one segment of an RDMA READ response.
constexpr Opcode read_response_opcode(bool first, bool last) {
  if (first && last) return Opcode::kReadResponseOnly;
  if (first) return Opcode::kReadResponseFirst;
  if (last) return Opcode::kReadResponseLast;
  return Opcode::kReadResponseMiddle;
}

}  // namespace rdmad::roce
