// libFuzzer target for the RoCEv2 decoder. Each input is tried as a whole IPv4/IPv6 frame and as a
// UDP datagram (with and without the ICRC check). Whatever decodes must re-encode to a packet that
// decodes to the same fields, and every outcome must be counted exactly once.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "rdmad/roce/packet.h"

namespace {

using namespace rdmad::roce;

void check(bool ok) {
  if (!ok) std::abort();
}

bool same_payload(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

// Re-encodes a decoded packet and checks that it decodes to the same thing.
void round_trip(const IpUdpInfo& ip, const Packet& pkt, bool frame) {
  static uint8_t buf[2 * 4096 + 128];
  const size_t n = frame ? encode_frame(ip, pkt, buf) : encode_datagram(ip, pkt, buf);
  check(n != 0);
  Packet again;
  IpUdpInfo ip2;
  const DecodeError e =
      frame ? decode_frame({buf, n}, &ip2, &again, nullptr, 0) : decode_datagram({buf, n}, &ip, &again);
  check(e == DecodeError::kOk);
  if (frame) check(ip2 == ip);
  Bth b = pkt.bth;
  b.tver = 0;
  check(again.bth == b);
  const OpcodeInfo& info = opcode_info(pkt.bth.opcode);
  check(!info.reth || again.reth == pkt.reth);
  check(!info.aeth || again.aeth == pkt.aeth);
  check(!info.immdt || again.imm_data == pkt.imm_data);
  if (info.payload != PayloadKind::kCnpZeros) check(same_payload(again.payload, pkt.payload));
}

IpUdpInfo fixed_ip() {
  IpUdpInfo ip;
  ip.src = IpAddr::v4(0x7F000001);
  ip.dst = IpAddr::v4(0x7F000001);
  return ip;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  DecodeCounters counters;
  IpUdpInfo ip;
  Packet pkt;
  if (decode_frame(in, &ip, &pkt, &counters, 0) == DecodeError::kOk) {
    check(pkt.payload.data() >= data && pkt.payload.data() + pkt.payload.size() <= data + size);
    round_trip(ip, pkt, true);
  }
  const IpUdpInfo fixed = fixed_ip();
  if (decode_datagram(in, &fixed, &pkt, &counters) == DecodeError::kOk) round_trip(fixed, pkt, false);
  Packet unchecked;
  if (decode_datagram(in, nullptr, &unchecked, &counters) == DecodeError::kOk) {
    check(unchecked.payload.data() >= data &&
          unchecked.payload.data() + unchecked.payload.size() <= data + size);
    round_trip(fixed, unchecked, false);
  }
  check(counters.decoded + counters.total_errors() == 3);
  return 0;
}
