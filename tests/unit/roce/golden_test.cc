// The golden CNP from the RoCEv2 design notes: a whole IPv4 CNP 22.22.22.8 -> 22.22.22.7, TOS 0x89,
// TTL 0x20, id 0x98c6, DF, UDP 56238 -> 4791, DestQP 0xD2, ICRC DAFC1BEF.
#include <gtest/gtest.h>

#include "rdmad/roce/packet.h"
#include "roce_test_util.h"

namespace rdmad::roce {
namespace {

const std::vector<uint8_t>& kGolden = test::golden_cnp();

IpUdpInfo golden_info() {
  IpUdpInfo ip;
  ip.src = IpAddr::v4(0x16161608);
  ip.dst = IpAddr::v4(0x16161607);
  ip.src_port = 56238;
  ip.dst_port = kRoceUdpPort;
  ip.tos = 0x89;
  ip.ttl = 0x20;
  ip.ip_id = 0x98c6;
  ip.dont_fragment = true;
  return ip;
}

TEST(RoceGolden, CnpEncodesByteForByte) {
  uint8_t buf[128];
  const size_t n = encode_frame(golden_info(), make_cnp(0xD2), buf);
  ASSERT_EQ(n, kGolden.size());
  EXPECT_EQ(std::vector<uint8_t>(buf, buf + n), kGolden);
}

TEST(RoceGolden, CnpDecodes) {
  IpUdpInfo ip;
  Packet pkt;
  DecodeCounters c;
  ASSERT_EQ(decode_frame(kGolden, &ip, &pkt, &c), DecodeError::kOk);
  EXPECT_EQ(ip, golden_info());
  EXPECT_EQ(pkt.bth.opcode, Opcode::kCnp);
  EXPECT_TRUE(pkt.bth.becn);
  EXPECT_EQ(pkt.bth.dest_qp, 0xD2u);
  EXPECT_EQ(pkt.bth.psn, 0u);
  EXPECT_EQ(pkt.payload.size(), kCnpReservedBytes);
  EXPECT_EQ(c.decoded, 1u);
  EXPECT_EQ(c.total_errors(), 0u);
}

TEST(RoceGolden, IcrcInvariantUnderTosTtlBecn) {
  const std::span<const uint8_t> dg(kGolden.data() + 28, kGolden.size() - 28 - kIcrcBytes);
  const uint32_t golden = load_icrc(kGolden.data() + kGolden.size() - 4);
  IpUdpInfo ip = golden_info();
  EXPECT_EQ(compute_icrc(ip, dg), golden);
  ip.tos = 0x02;
  ip.ttl = 1;
  EXPECT_EQ(compute_icrc(ip, dg), golden);
  ip.tos = 0xC3;
  ip.ttl = 255;
  EXPECT_EQ(compute_icrc(ip, dg), golden);
  std::vector<uint8_t> copy(dg.begin(), dg.end());
  copy[4] = 0x00;  // BECN cleared
  EXPECT_EQ(compute_icrc(ip, copy), golden);
  copy[4] = 0x80;  // FECN set
  EXPECT_EQ(compute_icrc(ip, copy), golden);
}

TEST(RoceGolden, IcrcChangesWithDestQpAndPsn) {
  const uint32_t golden = load_icrc(kGolden.data() + kGolden.size() - 4);
  uint8_t buf[128];
  Packet cnp = make_cnp(0xD3);
  ASSERT_GT(encode_frame(golden_info(), cnp, buf), 0u);
  EXPECT_NE(load_icrc(buf + kGolden.size() - 4), golden);
  cnp = make_cnp(0xD2);
  cnp.bth.psn = 1;
  ASSERT_GT(encode_frame(golden_info(), cnp, buf), 0u);
  EXPECT_NE(load_icrc(buf + kGolden.size() - 4), golden);
}

TEST(RoceGolden, IcrcChangesWithAddressesAndPorts) {
  const std::span<const uint8_t> dg(kGolden.data() + 28, kGolden.size() - 28 - kIcrcBytes);
  const uint32_t golden = load_icrc(kGolden.data() + kGolden.size() - 4);
  IpUdpInfo ip = golden_info();
  ip.src_port = 56239;
  EXPECT_NE(compute_icrc(ip, dg), golden);
  ip = golden_info();
  ip.dst = IpAddr::v4(0x16161609);
  EXPECT_NE(compute_icrc(ip, dg), golden);
  ip = golden_info();
  ip.ip_id = 0;
  EXPECT_NE(compute_icrc(ip, dg), golden);
}

}  // namespace
}  // namespace rdmad::roce
