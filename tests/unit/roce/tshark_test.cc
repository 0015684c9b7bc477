// Our frames, written to a pcap, decode in Wireshark's dissector (tshark) as RoCEv2 with the
// opcodes, QPNs, PSNs and extension headers we encoded: an independent check of the wire format.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "rdmad/roce/packet.h"
#include "roce_test_util.h"

namespace rdmad::roce {
namespace {

constexpr uint8_t kOpcodes[] = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09,
                                0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x81};

void put32(std::ofstream& f, uint32_t v) { f.write(reinterpret_cast<const char*>(&v), 4); }
void put16(std::ofstream& f, uint16_t v) { f.write(reinterpret_cast<const char*>(&v), 2); }

// A classic pcap file with LINKTYPE_RAW (101): each record is a bare IPv4/IPv6 packet.
void write_pcap(const std::string& path, const std::vector<std::vector<uint8_t>>& frames) {
  std::ofstream f(path, std::ios::binary);
  put32(f, 0xA1B2C3D4);
  put16(f, 2);
  put16(f, 4);
  put32(f, 0);
  put32(f, 0);
  put32(f, 65535);
  put32(f, 101);
  for (size_t i = 0; i < frames.size(); ++i) {
    put32(f, static_cast<uint32_t>(1700000000 + i));
    put32(f, 0);
    put32(f, static_cast<uint32_t>(frames[i].size()));
    put32(f, static_cast<uint32_t>(frames[i].size()));
    f.write(reinterpret_cast<const char*>(frames[i].data()), static_cast<std::streamsize>(frames[i].size()));
  }
}

std::string run(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

TEST(RoceTshark, EveryOpcodeDecodesAsRoceV2) {
  if (run("command -v tshark").empty()) GTEST_SKIP() << "tshark is not installed (Debian package tshark)";
  std::vector<uint8_t> payload(64);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i);
  std::vector<std::vector<uint8_t>> frames;
  std::ostringstream expect;
  for (int v6 = 0; v6 < 2; ++v6) {
    const IpUdpInfo ip = v6 ? test::v6_info() : test::v4_info();
    for (uint8_t op : kOpcodes) {
      Packet p = op == 0x81 ? make_cnp(0x1000 + op) : Packet{};
      p.bth.opcode = static_cast<Opcode>(op);
      p.bth.dest_qp = 0x1000 + op;
      p.bth.psn = 0x100 * op + static_cast<uint32_t>(v6);
      p.reth = {0x7F0000001000ull, 0xABCD, 64};
      p.aeth = Aeth::ack(7);
      p.imm_data = 0x11223344;
      const PayloadKind kind = opcode_info(op).payload;
      if (kind == PayloadKind::kFull || kind == PayloadKind::kTail) p.payload = payload;
      std::vector<uint8_t> f(ip_udp_header_bytes(ip) + datagram_bytes(p));
      ASSERT_EQ(encode_frame(ip, p, f), f.size());
      frames.push_back(std::move(f));
      char qpn[16];
      std::snprintf(qpn, sizeof qpn, "0x%06x", p.bth.dest_qp);
      expect << static_cast<int>(op) << ',' << qpn << ',' << p.bth.psn << ','
             << (opcode_info(op).reth ? "0x0000abcd" : "") << '\n';
    }
  }
  const std::string pcap = testing::TempDir() + "roce_opcodes.pcap";
  write_pcap(pcap, frames);
  const std::string out = run("tshark -n -r " + pcap +
                              " -T fields -E separator=, -e infiniband.bth.opcode -e infiniband.bth.destqp"
                              " -e infiniband.bth.psn -e infiniband.reth.r_key 2>/dev/null");
  EXPECT_EQ(out, expect.str());
}

}  // namespace
}  // namespace rdmad::roce
