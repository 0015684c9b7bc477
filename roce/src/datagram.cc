// The UDP-payload layer: BTH, extension headers, payload, pad, ICRC.
#include <cstdint>
#include <cstring>

#include "bytes.h"
#include "rdmad/roce/packet.h"

namespace rdmad::roce {
namespace {

constexpr uint8_t kZeros[kCnpReservedBytes] = {};

// Pad bytes after a payload of `payload` bytes (only the last packet of a message may need them).
uint8_t pad_bytes(const OpcodeInfo& info, size_t payload) {
  return info.payload == PayloadKind::kTail ? static_cast<uint8_t>((4 - payload % 4) % 4) : 0;
}

size_t ext_header_bytes(const OpcodeInfo& info) {
  return (info.reth ? kRethBytes : 0) + (info.aeth ? kAethBytes : 0) + (info.immdt ? kImmDtBytes : 0);
}

// Payload bytes the encoder writes (before pad), or SIZE_MAX if `payload` is not allowed.
size_t encoded_payload_bytes(const OpcodeInfo& info, size_t payload) {
  switch (info.payload) {
    case PayloadKind::kNone:
      return payload == 0 ? 0 : SIZE_MAX;
    case PayloadKind::kFull:
      return (payload == 0 || payload % 4 != 0 || payload > kMaxPayloadBytes) ? SIZE_MAX : payload;
    case PayloadKind::kTail:
      return payload > kMaxPayloadBytes ? SIZE_MAX : payload;
    case PayloadKind::kCnpZeros:
      return kCnpReservedBytes;
  }
  return SIZE_MAX;
}

// Checks the payload region (payload + pad) against the opcode.
DecodeError check_payload(const OpcodeInfo& info, size_t region, uint8_t pad) {
  switch (info.payload) {
    case PayloadKind::kNone:
      if (pad != 0) return DecodeError::kBadPadCount;
      return region == 0 ? DecodeError::kOk : DecodeError::kBadLength;
    case PayloadKind::kCnpZeros:
      if (pad != 0) return DecodeError::kBadPadCount;
      return region == kCnpReservedBytes ? DecodeError::kOk : DecodeError::kBadLength;
    case PayloadKind::kFull:
      // First/Middle segments are a whole path MTU: never empty, never padded.
      if (pad != 0) return DecodeError::kBadPadCount;
      if (region == 0 || region % 4 != 0 || region > kMaxPayloadBytes) return DecodeError::kBadLength;
      return DecodeError::kOk;
    case PayloadKind::kTail:
      if (region % 4 != 0) return DecodeError::kBadLength;
      if (pad > region) return DecodeError::kBadPadCount;
      return region - pad > kMaxPayloadBytes ? DecodeError::kBadLength : DecodeError::kOk;
  }
  return DecodeError::kUnknownOpcode;
}

DecodeError decode(std::span<const uint8_t> d, const IpUdpInfo* ip, Packet* pkt) {
  if (d.size() < kBthBytes + kIcrcBytes) return DecodeError::kTruncatedBth;
  const OpcodeInfo& info = opcode_info(d[0]);
  if (!info.valid) return DecodeError::kUnknownOpcode;
  Bth bth = read_bth(d.data());
  if (bth.tver != 0) return DecodeError::kBadTransportVersion;
  const size_t ext = ext_header_bytes(info);
  if (d.size() < kBthBytes + ext + kIcrcBytes) return DecodeError::kTruncatedExtHeader;
  const size_t region = d.size() - kBthBytes - ext - kIcrcBytes;
  if (DecodeError e = check_payload(info, region, bth.pad_count); e != DecodeError::kOk) return e;
  const size_t body = d.size() - kIcrcBytes;
  if (ip != nullptr &&
      !icrc_matches(*ip, body, compute_icrc(*ip, d.first(body)), load_icrc(d.data() + body))) {
    return DecodeError::kIcrcMismatch;
  }
  Packet out;
  out.bth = bth;
  const uint8_t* p = d.data() + kBthBytes;
  if (info.reth) {
    out.reth = read_reth(p);
    p += kRethBytes;
  }
  if (info.aeth) {
    out.aeth = read_aeth(p);
    p += kAethBytes;
  }
  if (info.immdt) {
    out.imm_data = detail::load_be32(p);
    p += kImmDtBytes;
  }
  out.payload = {p, region - bth.pad_count};
  *pkt = out;
  return DecodeError::kOk;
}

}  // namespace

Packet make_cnp(uint32_t dest_qp) {
  Packet p;
  p.bth.opcode = Opcode::kCnp;
  p.bth.becn = true;
  p.bth.pkey = kDefaultPkey;
  p.bth.dest_qp = dest_qp & kQpnMask;
  p.bth.psn = 0;
  p.payload = {kZeros, kCnpReservedBytes};
  return p;
}

size_t datagram_bytes(const Packet& pkt) {
  const OpcodeInfo& info = opcode_info(pkt.bth.opcode);
  if (!info.valid) return 0;
  const size_t payload = encoded_payload_bytes(info, pkt.payload.size());
  if (payload == SIZE_MAX) return 0;
  return kBthBytes + ext_header_bytes(info) + payload + pad_bytes(info, payload) + kIcrcBytes;
}

namespace {

// Writes the BTH (PadCnt for `payload` bytes) and the extension headers; returns their length.
size_t write_headers(const OpcodeInfo& info, const Packet& pkt, size_t payload, uint8_t* p) {
  Bth bth = pkt.bth;
  bth.tver = 0;
  bth.pad_count = pad_bytes(info, payload);
  uint8_t* const start = p;
  write_bth(bth, p);
  p += kBthBytes;
  if (info.reth) {
    write_reth(pkt.reth, p);
    p += kRethBytes;
  }
  if (info.aeth) {
    write_aeth(pkt.aeth, p);
    p += kAethBytes;
  }
  if (info.immdt) {
    detail::store_be32(p, pkt.imm_data);
    p += kImmDtBytes;
  }
  return static_cast<size_t>(p - start);
}

}  // namespace

size_t encode_datagram(const IpUdpInfo& ip, const Packet& pkt, std::span<uint8_t> out) {
  const size_t total = datagram_bytes(pkt);
  if (total == 0 || out.size() < total) return 0;
  const OpcodeInfo& info = opcode_info(pkt.bth.opcode);
  const bool cnp = info.payload == PayloadKind::kCnpZeros;
  const size_t payload = cnp ? kCnpReservedBytes : pkt.payload.size();
  uint8_t* p = out.data() + write_headers(info, pkt, payload, out.data());
  if (payload != 0) std::memcpy(p, cnp ? kZeros : pkt.payload.data(), payload);
  p += payload;
  for (uint8_t i = 0; i < pad_bytes(info, payload); ++i) *p++ = 0;
  const size_t body = total - kIcrcBytes;
  store_icrc(compute_icrc(ip, out.first(body)), out.data() + body);
  return total;
}

namespace {

// encode_datagram_gather's common part: `icrc(head, pad)` computes the ICRC.
template <class Icrc>
GatherEncoding gather(const Packet& pkt, std::span<uint8_t> out, Icrc icrc) {
  const size_t total = datagram_bytes(pkt);
  const OpcodeInfo& info = opcode_info(pkt.bth.opcode);
  if (total == 0 || info.payload == PayloadKind::kCnpZeros) return {};
  const size_t payload = pkt.payload.size();
  const size_t pad = pad_bytes(info, payload);
  const size_t head = total - payload - pad - kIcrcBytes;
  if (out.size() < head + pad + kIcrcBytes) return {};
  write_headers(info, pkt, payload, out.data());
  uint8_t* tail = out.data() + head;
  std::memset(tail, 0, pad);
  store_icrc(icrc(out.first(head), std::span<const uint8_t>(tail, pad)), tail + pad);
  return {head, pad + kIcrcBytes};
}

}  // namespace

GatherEncoding encode_datagram_gather(const IpUdpInfo& ip, const Packet& pkt, std::span<uint8_t> out) {
  return gather(pkt, out, [&](std::span<const uint8_t> head, std::span<const uint8_t> pad) {
    return compute_icrc(ip, head, {pkt.payload, pad});
  });
}

GatherEncoding encode_datagram_gather(const IpUdpInfo& ip, const Packet& pkt, std::span<uint8_t> out,
                                      uint32_t payload_crc, const Crc32Shift& shift) {
  if (shift.length() != pkt.payload.size()) return {};
  return gather(pkt, out, [&](std::span<const uint8_t> head, std::span<const uint8_t> pad) {
    return compute_icrc(ip, head, payload_crc, shift, pad);
  });
}

void seal_datagram(const IpUdpInfo& ip, std::span<uint8_t> datagram) {
  if (datagram.size() < kIcrcBytes) return;
  const size_t body = datagram.size() - kIcrcBytes;
  store_icrc(compute_icrc(ip, datagram.first(body)), datagram.data() + body);
}

DecodeError decode_datagram(std::span<const uint8_t> datagram, const IpUdpInfo* ip, Packet* pkt,
                            DecodeCounters* counters) {
  const DecodeError e = decode(datagram, ip, pkt);
  if (counters != nullptr) counters->record(e);
  return e;
}

uint64_t DecodeCounters::total_errors() const {
  uint64_t sum = 0;
  for (uint64_t e : errors) sum += e;
  return sum;
}

const char* decode_error_name(DecodeError e) {
  switch (e) {
    case DecodeError::kOk:
      return "ok";
    case DecodeError::kTruncatedIp:
      return "truncated ip header";
    case DecodeError::kBadIpVersion:
      return "bad ip version";
    case DecodeError::kBadIpHeader:
      return "bad ip header";
    case DecodeError::kNotUdp:
      return "not udp";
    case DecodeError::kTruncatedUdp:
      return "truncated udp header";
    case DecodeError::kBadUdpLength:
      return "bad udp length";
    case DecodeError::kWrongUdpPort:
      return "wrong udp port";
    case DecodeError::kTruncatedBth:
      return "truncated bth";
    case DecodeError::kUnknownOpcode:
      return "unknown opcode";
    case DecodeError::kBadTransportVersion:
      return "bad transport version";
    case DecodeError::kTruncatedExtHeader:
      return "truncated extension header";
    case DecodeError::kBadPadCount:
      return "bad pad count";
    case DecodeError::kBadLength:
      return "bad length";
    case DecodeError::kIcrcMismatch:
      return "icrc mismatch";
    case DecodeError::kCount:
      break;
  }
  return "unknown error";
}

}  // namespace rdmad::roce
