// Every opcode of the table encodes and decodes back to the same headers and payload bytes, over
// IPv4 and IPv6, for payload lengths that exercise every pad count.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "rdmad/roce/packet.h"
#include "roce_test_util.h"

namespace rdmad::roce {
namespace {

constexpr uint8_t kAllOpcodes[] = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09,
                                   0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x81};

std::vector<size_t> payload_lengths(PayloadKind kind) {
  switch (kind) {
    case PayloadKind::kNone:
      return {0};
    case PayloadKind::kFull:
      return {256, 1024, 4096};
    case PayloadKind::kTail:
      return {0, 1, 2, 3, 4, 5, 6, 7, 255, 4093, 4096};
    case PayloadKind::kCnpZeros:
      return {kCnpReservedBytes};
  }
  return {};
}

Packet sample(uint8_t opcode, std::span<const uint8_t> payload) {
  Packet p;
  p.bth.opcode = static_cast<Opcode>(opcode);
  p.bth.solicited = opcode % 2 == 0;
  p.bth.mig_req = true;
  p.bth.pkey = 0x8001;
  p.bth.fecn = opcode % 3 == 0;
  p.bth.becn = opcode == 0x81;
  p.bth.dest_qp = 0xABCDEF;
  p.bth.ack_req = opcode % 5 == 0;
  p.bth.psn = 0xFFFFFE;
  p.reth = {0x0123456789ABCDEFull, 0xCAFEBABE, 65536};
  p.aeth = Aeth::nak(0x123456, NakCode::kRemoteAccessError);
  p.imm_data = 0xDEADBEEF;
  p.payload = payload;
  return p;
}

void expect_same(const Packet& sent, const Packet& got, const OpcodeInfo& info) {
  Bth expect = sent.bth;
  expect.pad_count = got.bth.pad_count;
  EXPECT_EQ(got.bth, expect);
  EXPECT_EQ(got.bth.pad_count, info.payload == PayloadKind::kTail ? (4 - sent.payload.size() % 4) % 4 : 0);
  EXPECT_EQ(got.reth, info.reth ? sent.reth : Reth{});
  EXPECT_EQ(got.aeth, info.aeth ? sent.aeth : Aeth{});
  EXPECT_EQ(got.imm_data, info.immdt ? sent.imm_data : 0u);
  ASSERT_EQ(got.payload.size(), sent.payload.size());
  EXPECT_TRUE(std::equal(got.payload.begin(), got.payload.end(), sent.payload.begin()));
}

class RoceRoundTrip : public ::testing::TestWithParam<bool> {};

TEST_P(RoceRoundTrip, EveryOpcodeEveryPad) {
  const IpUdpInfo ip = GetParam() ? test::v6_info() : test::v4_info();
  std::vector<uint8_t> payload(kMaxPayloadBytes);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7 + 3);
  std::vector<uint8_t> cnp_zeros(kCnpReservedBytes, 0);
  std::vector<uint8_t> buf(8192);
  DecodeCounters counters;
  uint64_t expected = 0;
  for (uint8_t op : kAllOpcodes) {
    const OpcodeInfo& info = opcode_info(op);
    ASSERT_TRUE(info.valid) << int(op);
    for (size_t len : payload_lengths(info.payload)) {
      SCOPED_TRACE(testing::Message() << opcode_name(op) << " payload " << len);
      const std::span<const uint8_t> pl = info.payload == PayloadKind::kCnpZeros
                                              ? std::span<const uint8_t>(cnp_zeros)
                                              : std::span<const uint8_t>(payload).first(len);
      const Packet sent = sample(op, pl);
      const size_t n = encode_datagram(ip, sent, buf);
      ASSERT_EQ(n, datagram_bytes(sent));
      ASSERT_EQ(n % 4, 0u);
      Packet got;
      ASSERT_EQ(decode_datagram({buf.data(), n}, &ip, &got, &counters), DecodeError::kOk);
      ++expected;
      expect_same(sent, got, info);
      EXPECT_EQ(got.payload.data(), buf.data() + (n - kIcrcBytes - got.bth.pad_count - len))
          << "payload must be a view into the input buffer";
      // Exactly n bytes: one byte less of buffer fails, nothing past n is touched.
      EXPECT_EQ(encode_datagram(ip, sent, {buf.data(), n - 1}), 0u);

      // Encoded around the payload: head, payload, tail put together are the same bytes.
      std::vector<uint8_t> parts(64, 0xEE);
      const GatherEncoding g = encode_datagram_gather(ip, sent, parts);
      if (info.payload == PayloadKind::kCnpZeros) {
        EXPECT_EQ(g.head_bytes, 0u) << "a CNP is never gathered";
        continue;
      }
      ASSERT_GT(g.head_bytes, 0u);
      std::vector<uint8_t> joined(parts.begin(), parts.begin() + static_cast<std::ptrdiff_t>(g.head_bytes));
      joined.insert(joined.end(), pl.begin(), pl.end());
      joined.insert(joined.end(), parts.begin() + static_cast<std::ptrdiff_t>(g.head_bytes),
                    parts.begin() + static_cast<std::ptrdiff_t>(g.head_bytes + g.tail_bytes));
      EXPECT_EQ(joined, std::vector<uint8_t>(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n)));
      EXPECT_EQ(encode_datagram_gather(ip, sent, {parts.data(), g.head_bytes + g.tail_bytes - 1}).head_bytes, 0u);

      // With the payload's CRC given instead of read: the same head and tail, byte for byte.
      const Crc32Shift shift(pl.size());
      std::vector<uint8_t> combined(64, 0xEE);
      const GatherEncoding c = encode_datagram_gather(ip, sent, combined, crc32_update(0, pl), shift);
      ASSERT_EQ(c.head_bytes, g.head_bytes);
      ASSERT_EQ(c.tail_bytes, g.tail_bytes);
      EXPECT_EQ(combined, parts);
      // A wrong payload CRC gives a wrong ICRC; a shift for another length is refused.
      std::vector<uint8_t> wrong(64, 0xEE);
      encode_datagram_gather(ip, sent, wrong, crc32_update(0, pl) ^ 1, shift);
      EXPECT_NE(wrong, parts);
      EXPECT_EQ(encode_datagram_gather(ip, sent, wrong, crc32_update(0, pl), Crc32Shift(pl.size() + 4)).head_bytes, 0u);
    }
  }
  EXPECT_EQ(counters.decoded, expected);
  EXPECT_EQ(counters.total_errors(), 0u);
}

INSTANTIATE_TEST_SUITE_P(IpVersions, RoceRoundTrip, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "ipv6" : "ipv4"; });

TEST(RoceEncode, RejectsPayloadTheOpcodeCannotCarry) {
  const IpUdpInfo ip = test::v4_info();
  uint8_t buf[8192] = {};
  std::vector<uint8_t> pl(kMaxPayloadBytes + 1, 1);
  const std::span<const uint8_t> s(pl);
  EXPECT_EQ(encode_datagram(ip, sample(0x11, s.first(4)), buf), 0u) << "ACK with payload";
  EXPECT_EQ(encode_datagram(ip, sample(0x0C, s.first(1)), buf), 0u) << "READ request with payload";
  EXPECT_EQ(encode_datagram(ip, sample(0x00, s.first(0)), buf), 0u) << "empty SEND First";
  EXPECT_EQ(encode_datagram(ip, sample(0x01, s.first(255)), buf), 0u) << "unaligned SEND Middle";
  EXPECT_EQ(encode_datagram(ip, sample(0x04, s), buf), 0u) << "payload above 4096";
  EXPECT_EQ(encode_datagram(ip, sample(0x12, s.first(0)), buf), 0u) << "unknown opcode";
  EXPECT_EQ(datagram_bytes(sample(0x12, {})), 0u);
}

TEST(RoceEncode, CnpIgnoresGivenPayloadAndWritesZeros) {
  const IpUdpInfo ip = test::v4_info();
  std::vector<uint8_t> junk(40, 0xAA);
  Packet cnp = make_cnp(0x1D2);
  cnp.payload = junk;
  uint8_t buf[64];
  std::fill(std::begin(buf), std::end(buf), 0x55);
  ASSERT_EQ(encode_datagram(ip, cnp, buf), kBthBytes + kCnpReservedBytes + kIcrcBytes);
  for (size_t i = kBthBytes; i < kBthBytes + kCnpReservedBytes; ++i) EXPECT_EQ(buf[i], 0) << i;
}

TEST(RoceEncode, SealRecomputesIcrcAfterInPlaceEdit) {
  const IpUdpInfo ip = test::v4_info();
  uint8_t buf[64];
  const size_t n = encode_datagram(ip, make_cnp(7), buf);
  buf[7] = 8;  // DestQP low byte
  Packet got;
  EXPECT_EQ(decode_datagram({buf, n}, &ip, &got), DecodeError::kIcrcMismatch);
  seal_datagram(ip, {buf, n});
  ASSERT_EQ(decode_datagram({buf, n}, &ip, &got), DecodeError::kOk);
  EXPECT_EQ(got.bth.dest_qp, 8u);
}

TEST(RoceHeaders, AethSyndromes) {
  EXPECT_EQ(Aeth::ack(5).type(), AckType::kAck);
  EXPECT_EQ(Aeth::ack(5).value(), kAckCreditInvalid);
  EXPECT_EQ(Aeth::rnr_nak(5, 14).syndrome, 0x2E);
  EXPECT_EQ(Aeth::rnr_nak(5, 14).type(), AckType::kRnrNak);
  EXPECT_EQ(Aeth::nak(5, NakCode::kPsnSequenceError).syndrome, 0x60);
  EXPECT_EQ(Aeth::nak(5, NakCode::kRemoteAccessError).syndrome, 0x62);
  EXPECT_EQ(Aeth::nak(5, NakCode::kRemoteOperationalError).type(), AckType::kNak);
  EXPECT_EQ(Aeth::nak(5, NakCode::kInvalidRequest).nak_code(), NakCode::kInvalidRequest);
  EXPECT_EQ(Aeth::ack(0x1234567).msn, 0x234567u);
}

TEST(RoceHeaders, PsnArithmeticWraps) {
  EXPECT_EQ(psn_add(0xFFFFFF, 1), 0u);
  EXPECT_EQ(psn_add(0xFFFFF0, 0x20), 0x10u);
  EXPECT_EQ(psn_diff(0x10, 0xFFFFF0), 0x20);
  EXPECT_EQ(psn_diff(0xFFFFF0, 0x10), -0x20);
  EXPECT_EQ(psn_diff(5, 5), 0);
  EXPECT_EQ(psn_diff(0x800000, 0), -0x800000);
}

TEST(RoceHeaders, SegmentOpcodes) {
  EXPECT_EQ(send_opcode(true, true, false), Opcode::kSendOnly);
  EXPECT_EQ(send_opcode(false, true, true), Opcode::kSendLastImm);
  EXPECT_EQ(send_opcode(false, false, true), Opcode::kSendMiddle);
  EXPECT_EQ(write_opcode(true, false, true), Opcode::kWriteFirst);
  EXPECT_EQ(write_opcode(true, true, true), Opcode::kWriteOnlyImm);
  EXPECT_EQ(write_opcode(false, true, false), Opcode::kWriteLast);
  EXPECT_EQ(read_response_opcode(true, true), Opcode::kReadResponseOnly);
  EXPECT_EQ(read_response_opcode(false, false), Opcode::kReadResponseMiddle);
  EXPECT_TRUE(opcode_info(Opcode::kReadResponseFirst).aeth);
  EXPECT_FALSE(opcode_info(Opcode::kReadResponseMiddle).aeth);
  EXPECT_TRUE(opcode_info(Opcode::kWriteOnlyImm).reth && opcode_info(Opcode::kWriteOnlyImm).immdt);
  EXPECT_FALSE(opcode_info(0x80).valid) << "native IB CNP opcode is not RoCEv2";
  EXPECT_STREQ(opcode_name(0x81), "CNP");
}

}  // namespace
}  // namespace rdmad::roce
