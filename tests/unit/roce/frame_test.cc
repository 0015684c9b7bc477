// Whole IPv4/IPv6 frames: header checksums, masked fields, and every malformed IP/UDP case.
#include <gtest/gtest.h>

#include <vector>

#include "rdmad/roce/packet.h"
#include "roce_test_util.h"

namespace rdmad::roce {
namespace {

uint16_t ones_complement_sum(const uint8_t* p, size_t n, uint32_t sum = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) sum += (p[i] << 8) | p[i + 1];
  if (n % 2) sum += p[n - 1] << 8;
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

std::vector<uint8_t> write_only_frame(const IpUdpInfo& ip, std::vector<uint8_t>& payload) {
  Packet p;
  p.bth.opcode = Opcode::kWriteOnlyImm;
  p.bth.dest_qp = 0x42;
  p.bth.psn = 99;
  p.reth = {0x1000, 0x77, static_cast<uint32_t>(payload.size())};
  p.imm_data = 0xA5A5A5A5;
  p.payload = payload;
  std::vector<uint8_t> out(ip_udp_header_bytes(ip) + datagram_bytes(p));
  EXPECT_EQ(encode_frame(ip, p, out), out.size());
  return out;
}

TEST(RoceFrame, Ipv4HeaderChecksumAndFields) {
  std::vector<uint8_t> pl(37, 9);
  const IpUdpInfo ip = test::v4_info();
  const std::vector<uint8_t> f = write_only_frame(ip, pl);
  EXPECT_EQ(ones_complement_sum(f.data(), 20), 0xFFFF) << "IPv4 header checksum";
  EXPECT_EQ(f[26], 0);
  EXPECT_EQ(f[27], 0) << "RoCEv2 over IPv4 sends UDP checksum 0";
  IpUdpInfo got_ip;
  Packet got;
  ASSERT_EQ(decode_frame(f, &got_ip, &got), DecodeError::kOk);
  EXPECT_EQ(got_ip, ip);
  EXPECT_EQ(got.imm_data, 0xA5A5A5A5u);
  EXPECT_EQ(std::vector<uint8_t>(got.payload.begin(), got.payload.end()), pl);
}

TEST(RoceFrame, Ipv6UdpChecksumAndMaskedFields) {
  std::vector<uint8_t> pl(100, 3);
  IpUdpInfo ip = test::v6_info();
  const std::vector<uint8_t> f = write_only_frame(ip, pl);
  // UDP checksum over the IPv6 pseudo-header verifies to 0xFFFF.
  uint32_t sum = ones_complement_sum(f.data() + 8, 32);
  sum += static_cast<uint32_t>(f.size() - 40) + 17;
  EXPECT_EQ(ones_complement_sum(f.data() + 40, f.size() - 40, sum), 0xFFFF);
  IpUdpInfo got_ip;
  Packet got;
  ASSERT_EQ(decode_frame(f, &got_ip, &got), DecodeError::kOk);
  EXPECT_EQ(got_ip.flow_label, 0x12345u);
  EXPECT_TRUE(got_ip.src.v6);
  EXPECT_EQ(got_ip.src, ip.src);
  // Traffic class, flow label and hop limit are masked: the ICRC is unchanged.
  ip.tos = 0xC3;
  ip.flow_label = 0xFFFFF;
  ip.ttl = 1;
  const std::vector<uint8_t> g = write_only_frame(ip, pl);
  EXPECT_EQ(load_icrc(g.data() + g.size() - 4), load_icrc(f.data() + f.size() - 4));
  ip.dst.bytes[15] = 3;
  const std::vector<uint8_t> h = write_only_frame(ip, pl);
  EXPECT_NE(load_icrc(h.data() + h.size() - 4), load_icrc(f.data() + f.size() - 4));
}

TEST(RoceFrame, TrailingLinkPaddingIsIgnored) {
  const IpUdpInfo ip = test::v4_info();
  std::vector<uint8_t> pl(1, 1);
  std::vector<uint8_t> f = write_only_frame(ip, pl);
  f.resize(f.size() + 6, 0);  // Ethernet minimum-frame padding
  IpUdpInfo got_ip;
  Packet got;
  EXPECT_EQ(decode_frame(f, &got_ip, &got), DecodeError::kOk);
}

struct FrameCase {
  const char* name;
  void (*mutate)(std::vector<uint8_t>&);
  DecodeError expect;
};

const FrameCase kFrameCases[] = {
    {"empty", [](std::vector<uint8_t>& f) { f.clear(); }, DecodeError::kTruncatedIp},
    {"short ipv4", [](std::vector<uint8_t>& f) { f.resize(19); }, DecodeError::kTruncatedIp},
    {"total length past end", [](std::vector<uint8_t>& f) { f.pop_back(); }, DecodeError::kTruncatedIp},
    {"version 5", [](std::vector<uint8_t>& f) { f[0] = 0x55; }, DecodeError::kBadIpVersion},
    {"ip options", [](std::vector<uint8_t>& f) { f[0] = 0x46; }, DecodeError::kBadIpHeader},
    {"total below header", [](std::vector<uint8_t>& f) { f[2] = 0, f[3] = 19; }, DecodeError::kBadIpHeader},
    {"fragment", [](std::vector<uint8_t>& f) { f[6] |= 0x20; }, DecodeError::kBadIpHeader},
    {"tcp", [](std::vector<uint8_t>& f) { f[9] = 6; }, DecodeError::kNotUdp},
    {"no udp header",
     [](std::vector<uint8_t>& f) {
       f.resize(24);
       f[2] = 0, f[3] = 24;
     },
     DecodeError::kTruncatedUdp},
    {"udp length", [](std::vector<uint8_t>& f) { f[25] += 1; }, DecodeError::kBadUdpLength},
    {"port", [](std::vector<uint8_t>& f) { f[23] = 0xB8; }, DecodeError::kWrongUdpPort},
    {"short bth",
     [](std::vector<uint8_t>& f) {
       f.resize(28 + 15);
       f[3] = 28 + 15, f[25] = 8 + 15;
     },
     DecodeError::kTruncatedBth},
    {"opcode", [](std::vector<uint8_t>& f) { f[28] = 0x64; }, DecodeError::kUnknownOpcode},
    {"icrc", [](std::vector<uint8_t>& f) { f[f.size() - 5] ^= 1; }, DecodeError::kIcrcMismatch},
    {"short ipv6", [](std::vector<uint8_t>& f) { f.assign(39, 0x60); }, DecodeError::kTruncatedIp},
};

TEST(RoceFrame, MalformedFramesEachHaveTheirError) {
  const IpUdpInfo ip = test::v4_info();
  std::vector<uint8_t> pl(8, 1);
  const std::vector<uint8_t> good = write_only_frame(ip, pl);
  DecodeCounters c;
  for (const FrameCase& fc : kFrameCases) {
    std::vector<uint8_t> f = good;
    fc.mutate(f);
    IpUdpInfo got_ip;
    Packet got;
    EXPECT_EQ(decode_frame(f, &got_ip, &got, &c), fc.expect) << fc.name;
  }
  EXPECT_EQ(c.total_errors(), std::size(kFrameCases));
  EXPECT_EQ(c.count(DecodeError::kTruncatedIp), 4u);
  EXPECT_EQ(c.count(DecodeError::kBadIpHeader), 3u);
  EXPECT_EQ(c.decoded, 0u);
}

TEST(RoceFrame, Ipv6Malformed) {
  const IpUdpInfo ip = test::v6_info();
  std::vector<uint8_t> pl(8, 1);
  std::vector<uint8_t> f = write_only_frame(ip, pl);
  IpUdpInfo got_ip;
  Packet got;
  std::vector<uint8_t> g = f;
  g[6] = 0;  // hop-by-hop extension header
  EXPECT_EQ(decode_frame(g, &got_ip, &got), DecodeError::kNotUdp);
  g = f;
  g.pop_back();
  EXPECT_EQ(decode_frame(g, &got_ip, &got), DecodeError::kTruncatedIp);
  EXPECT_EQ(decode_frame(f, &got_ip, &got, nullptr, 0), DecodeError::kOk) << "port 0 accepts any";
}

}  // namespace
}  // namespace rdmad::roce
