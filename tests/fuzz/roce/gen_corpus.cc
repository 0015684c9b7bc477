// Writes the seed corpus for roce_decode_fuzz: a frame (IPv4 and IPv6) and a datagram of every
// opcode, plus one malformed input per decode error. Usage: roce_fuzz_gen_corpus DIR
#include <cstdio>
#include <string>
#include <vector>

#include "../corpus_dir.h"
#include "rdmad/roce/packet.h"

using namespace rdmad::roce;

namespace {

Packet sample(uint8_t op, std::span<const uint8_t> payload) {
  Packet p;
  p.bth.opcode = static_cast<Opcode>(op);
  p.bth.dest_qp = 0x12;
  p.bth.psn = 0xFFFFF0 + op;
  p.bth.ack_req = true;
  p.reth = {0x7f0000001000, 0x1234, 4096};
  p.aeth = Aeth::ack(op);
  p.imm_data = 0x01020304;
  const PayloadKind kind = opcode_info(op).payload;
  if (kind == PayloadKind::kFull) p.payload = payload.first(256);
  if (kind == PayloadKind::kTail) p.payload = payload.first(op % 7);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = rdmad::fuzz::corpus_dir_from_args(argc, argv);
  std::vector<uint8_t> payload(4096);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i);
  IpUdpInfo v4;
  v4.src = IpAddr::v4(0x7F000001);
  v4.dst = IpAddr::v4(0x7F000001);
  IpUdpInfo v6 = v4;
  v6.src = IpAddr::from_v6({0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
  v6.dst = IpAddr::from_v6({0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2});
  std::vector<uint8_t> buf(8192);
  for (int op = 0; op < 256; ++op) {
    if (!opcode_info(static_cast<uint8_t>(op)).valid) continue;
    const Packet p = sample(static_cast<uint8_t>(op), payload);
    char name[64];
    size_t n = encode_datagram(v4, p, buf);
    std::snprintf(name, sizeof name, "datagram_%02x", op);
    rdmad::fuzz::write_seed(dir, name, {buf.begin(), buf.begin() + static_cast<long>(n)});
    n = encode_frame(v4, p, buf);
    std::snprintf(name, sizeof name, "frame4_%02x", op);
    rdmad::fuzz::write_seed(dir, name, {buf.begin(), buf.begin() + static_cast<long>(n)});
    n = encode_frame(v6, p, buf);
    std::snprintf(name, sizeof name, "frame6_%02x", op);
    rdmad::fuzz::write_seed(dir, name, {buf.begin(), buf.begin() + static_cast<long>(n)});
  }
  // Malformed seeds: truncated, bad pad, bad TVer, unknown opcode, bad ICRC, bad UDP length.
  const size_t n = encode_frame(v4, sample(0x0B, payload), buf);
  std::vector<uint8_t> f(buf.begin(), buf.begin() + static_cast<long>(n));
  rdmad::fuzz::write_seed(dir, "bad_truncated", {f.begin(), f.begin() + 40});
  std::vector<uint8_t> g = f;
  g[29] |= 0x01;
  rdmad::fuzz::write_seed(dir, "bad_tver", g);
  g = f;
  g[28] = 0x64;
  rdmad::fuzz::write_seed(dir, "bad_opcode", g);
  g = f;
  g.back() ^= 0xFF;
  rdmad::fuzz::write_seed(dir, "bad_icrc", g);
  g = f;
  g[25] ^= 0x04;
  rdmad::fuzz::write_seed(dir, "bad_udp_length", g);
  g = f;
  g[0] = 0x46;
  rdmad::fuzz::write_seed(dir, "bad_ihl", g);
  return 0;
}
