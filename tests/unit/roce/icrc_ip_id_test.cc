// A receiver behind a UDP socket cannot see the IPv4 id its peer sent, and the ICRC covers it. rxe
// and hardware NICs send real ids (rxe: the kernel's per-destination generator), so the soft
// receiver solves for the id that makes the ICRC match (ip_id_known = false) instead of assuming 0.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "rdmad/roce/crc32.h"
#include "rdmad/roce/packet.h"
#include "roce_test_util.h"

namespace rdmad::roce {
namespace {

// The golden CNP (golden_test.cc): sent with IPv4 id 0x98c6.
const std::vector<uint8_t>& kGolden = test::golden_cnp();

IpUdpInfo golden_as_received() {
  IpUdpInfo ip;
  ip.src = IpAddr::v4(0x16161608);
  ip.dst = IpAddr::v4(0x16161607);
  ip.src_port = 56238;
  ip.ip_id = 0;  // what a socket's receiver assumes
  return ip;
}

TEST(Crc32Solve, FindsTheChangeOfATwoByteFieldAnywhereInAMessage) {
  std::mt19937 rng(7);
  for (size_t len : {2u, 3u, 16u, 62u, 1100u, 4200u}) {
    std::vector<uint8_t> m(len);
    for (auto& b : m) b = static_cast<uint8_t>(rng());
    for (int trial = 0; trial < 50; ++trial) {
      const size_t at = rng() % (len - 1);
      const auto change = static_cast<uint16_t>(rng() | 1);
      std::vector<uint8_t> m2 = m;
      m2[at] ^= static_cast<uint8_t>(change >> 8);
      m2[at + 1] ^= static_cast<uint8_t>(change);
      const uint32_t delta = crc32_update(0, m) ^ crc32_update(0, m2);
      const auto got = crc32_solve_be16(delta, len - at - 2);
      ASSERT_TRUE(got.has_value()) << "len " << len << " at " << at;
      EXPECT_EQ(*got, change) << "len " << len << " at " << at;
      EXPECT_EQ(crc32_solve_be16(0, len - at - 2), std::optional<uint16_t>(0));
    }
  }
}

TEST(Crc32Solve, RejectsChangesElsewhere) {
  // A change of another byte (with or without the field) is no change of the field alone: a burst
  // shorter than 33 bits always changes the CRC in a way two adjacent bytes cannot.
  std::mt19937 rng(11);
  std::vector<uint8_t> m(1200);
  for (auto& b : m) b = static_cast<uint8_t>(rng());
  const size_t at = 12;
  for (size_t other : {size_t{14}, size_t{15}, size_t{11}, size_t{9}}) {
    std::vector<uint8_t> m2 = m;
    m2[other] ^= 0x40;
    m2[at] ^= 0x12;
    EXPECT_FALSE(crc32_solve_be16(crc32_update(0, m) ^ crc32_update(0, m2), m.size() - at - 2).has_value())
        << "byte " << other;
  }
  // Random deltas: about one in 65536 is a field change.
  int accepted = 0;
  for (int i = 0; i < 20000; ++i)
    accepted += crc32_solve_be16(static_cast<uint32_t>(rng()), 1000).has_value();
  EXPECT_LE(accepted, 4);
}

TEST(Crc32Solve, TheOrderOfXIsTwoToTheThirtyTwoMinusOne) {
  // crc32_solve_be16 divides by x^(8n) as a multiplication by x^(8·(2^32 - 1 - n)).
  const Crc32Shift full(0xFFFFFFFFull);
  for (uint32_t v : {1u, 0x80000000u, 0xDEADBEEFu, 0x12345678u}) EXPECT_EQ(full.combine(v, 0), v);
}

TEST(IcrcIpId, AReceiverThatCannotSeeTheIdAcceptsTheSendersId) {
  const std::span<const uint8_t> dg(kGolden.data() + 28, kGolden.size() - 28);
  IpUdpInfo ip = golden_as_received();
  Packet pkt;
  EXPECT_EQ(decode_datagram(dg, &ip, &pkt), DecodeError::kIcrcMismatch) << "id 0 assumed and believed";
  ip.ip_id_known = false;
  ASSERT_EQ(decode_datagram(dg, &ip, &pkt), DecodeError::kOk);
  EXPECT_EQ(pkt.bth.dest_qp, 0xD2u);
}

TEST(IcrcIpId, EveryIdOfAnEncodedPacketIsAccepted) {
  IpUdpInfo sent = test::v4_info();
  std::vector<uint8_t> payload(1027);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7);
  Packet p;
  p.bth.opcode = Opcode::kSendOnlyImm;
  p.bth.dest_qp = 0x1234;
  p.bth.psn = 0xFFFFFE;
  p.imm_data = 0xC0FFEE;
  p.payload = payload;
  IpUdpInfo received = test::v4_info();
  received.ip_id_known = false;
  uint8_t buf[2048];
  for (uint32_t id : {0u, 1u, 0x98c6u, 0xFFFFu, 0x8000u}) {
    sent.ip_id = static_cast<uint16_t>(id);
    const size_t n = encode_datagram(sent, p, buf);
    ASSERT_GT(n, 0u);
    Packet got;
    ASSERT_EQ(decode_datagram({buf, n}, &received, &got), DecodeError::kOk) << "id " << id;
    EXPECT_EQ(got.payload.size(), payload.size());
  }
}

TEST(IcrcIpId, CorruptionIsStillCaught) {
  IpUdpInfo sent = test::v4_info();
  sent.ip_id = 0x4321;
  std::vector<uint8_t> payload(256, 0x5A);
  Packet p;
  p.bth.opcode = Opcode::kWriteOnly;
  p.bth.dest_qp = 0x77;
  p.reth = {0x1000, 0xABCD, 256};
  p.payload = payload;
  uint8_t buf[512];
  const size_t n = encode_datagram(sent, p, buf);
  IpUdpInfo received = test::v4_info();
  received.ip_id_known = false;
  for (size_t at : {size_t{0}, size_t{7}, size_t{20}, n / 2, n - 5, n - 1}) {
    std::vector<uint8_t> bad(buf, buf + n);
    bad[at] ^= 0x01;
    Packet got;
    EXPECT_EQ(decode_datagram(bad, &received, &got), DecodeError::kIcrcMismatch) << "byte " << at;
  }
  // Another source address is no other id either.
  received.src = IpAddr::v4(0x0A000009);
  Packet got;
  EXPECT_EQ(decode_datagram({buf, n}, &received, &got), DecodeError::kIcrcMismatch);
}

TEST(IcrcIpId, Ipv6HasNoIdToSolveFor) {
  IpUdpInfo ip = test::v6_info();
  ip.ip_id_known = false;
  Packet p = make_cnp(9);
  uint8_t buf[64];
  const size_t n = encode_datagram(ip, p, buf);
  buf[20] ^= 0x01;  // one reserved CNP byte
  Packet got;
  EXPECT_EQ(decode_datagram({buf, n}, &ip, &got), DecodeError::kIcrcMismatch);
}

}  // namespace
}  // namespace rdmad::roce
