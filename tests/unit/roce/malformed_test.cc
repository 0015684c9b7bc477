// Every way a datagram can be malformed maps to its own error, is counted once, and leaves the
// output packet untouched.
#include <gtest/gtest.h>

#include <vector>

#include "rdmad/roce/packet.h"
#include "roce_test_util.h"

namespace rdmad::roce {
namespace {

class RoceMalformed : public ::testing::Test {
 protected:
  // Encodes `op` with `payload` bytes, then lets the test corrupt it.
  std::vector<uint8_t> encode(Opcode op, size_t payload) {
    std::vector<uint8_t> data(payload, 0x5A);
    Packet p;
    p.bth.opcode = op;
    p.bth.dest_qp = 0x11;
    p.payload = data;
    std::vector<uint8_t> out(datagram_bytes(p));
    EXPECT_EQ(encode_datagram(ip_, p, out), out.size());
    return out;
  }

  // Decodes, re-sealing the ICRC first so that only the intended defect is present.
  DecodeError decode(std::vector<uint8_t> d, bool reseal = true) {
    if (reseal) seal_datagram(ip_, d);
    Packet pkt = sentinel();
    const DecodeError e = decode_datagram(d, &ip_, &pkt, &counters_);
    if (e != DecodeError::kOk) {
      EXPECT_EQ(pkt.bth.dest_qp, sentinel().bth.dest_qp) << "output written on error";
      EXPECT_EQ(pkt.payload.data(), nullptr);
    }
    return e;
  }

  static Packet sentinel() {
    Packet p;
    p.bth.dest_qp = 0x777;
    return p;
  }

  static void set_pad(std::vector<uint8_t>& d, uint8_t pad) {
    d[1] = static_cast<uint8_t>((d[1] & ~0x30) | (pad << 4));
  }

  IpUdpInfo ip_ = test::v4_info();
  DecodeCounters counters_;
};

TEST_F(RoceMalformed, TruncatedBth) {
  std::vector<uint8_t> d = encode(Opcode::kAcknowledge, 0);
  for (size_t n = 0; n < kBthBytes + kIcrcBytes; ++n) {
    EXPECT_EQ(decode({d.begin(), d.begin() + static_cast<long>(n)}, false), DecodeError::kTruncatedBth) << n;
  }
  EXPECT_EQ(counters_.count(DecodeError::kTruncatedBth), kBthBytes + kIcrcBytes);
}

TEST_F(RoceMalformed, UnknownOpcodes) {
  std::vector<uint8_t> d = encode(Opcode::kSendOnly, 8);
  int unknown = 0;
  for (int op = 0; op < 256; ++op) {
    if (opcode_info(static_cast<uint8_t>(op)).valid) continue;
    d[0] = static_cast<uint8_t>(op);
    EXPECT_EQ(decode(d), DecodeError::kUnknownOpcode) << op;
    ++unknown;
  }
  EXPECT_EQ(unknown, 256 - 19);
  EXPECT_EQ(counters_.count(DecodeError::kUnknownOpcode), static_cast<uint64_t>(unknown));
  EXPECT_EQ(counters_.decoded, 0u);
}

TEST_F(RoceMalformed, TransportVersion) {
  std::vector<uint8_t> d = encode(Opcode::kSendOnly, 8);
  d[1] |= 0x01;
  EXPECT_EQ(decode(d), DecodeError::kBadTransportVersion);
}

TEST_F(RoceMalformed, TruncatedExtensionHeaders) {
  // RETH (16), AETH (4), ImmDt (4), RETH + ImmDt (20): one byte short of each.
  for (Opcode op : {Opcode::kWriteOnly, Opcode::kReadRequest, Opcode::kAcknowledge, Opcode::kSendOnlyImm,
                    Opcode::kWriteOnlyImm, Opcode::kReadResponseOnly}) {
    std::vector<uint8_t> d = encode(op, 0);
    d.erase(d.begin() + kBthBytes);  // drop one header byte, keep the ICRC
    EXPECT_EQ(decode(d), DecodeError::kTruncatedExtHeader) << opcode_name(static_cast<uint8_t>(op));
  }
}

TEST_F(RoceMalformed, BadPadCounts) {
  std::vector<uint8_t> ack = encode(Opcode::kAcknowledge, 0);
  set_pad(ack, 1);
  EXPECT_EQ(decode(ack), DecodeError::kBadPadCount) << "ACK carries no payload, so no pad";
  std::vector<uint8_t> first = encode(Opcode::kSendFirst, 256);
  set_pad(first, 3);
  EXPECT_EQ(decode(first), DecodeError::kBadPadCount) << "First segments are never padded";
  std::vector<uint8_t> cnp = encode(Opcode::kCnp, 0);
  set_pad(cnp, 2);
  EXPECT_EQ(decode(cnp), DecodeError::kBadPadCount);
  std::vector<uint8_t> empty = encode(Opcode::kSendOnly, 0);
  set_pad(empty, 2);
  EXPECT_EQ(decode(empty), DecodeError::kBadPadCount) << "more pad than payload";
  EXPECT_EQ(counters_.count(DecodeError::kBadPadCount), 4u);
}

TEST_F(RoceMalformed, LengthsThatDisagreeWithTheOpcode) {
  std::vector<uint8_t> ack = encode(Opcode::kAcknowledge, 0);
  ack.insert(ack.begin() + kBthBytes + kAethBytes, 4, 0);
  EXPECT_EQ(decode(ack), DecodeError::kBadLength) << "ACK with payload";
  std::vector<uint8_t> read = encode(Opcode::kReadRequest, 0);
  read.insert(read.begin() + kBthBytes + kRethBytes, 8, 0);
  EXPECT_EQ(decode(read), DecodeError::kBadLength) << "READ request with payload";
  std::vector<uint8_t> cnp = encode(Opcode::kCnp, 0);
  cnp.erase(cnp.begin() + kBthBytes, cnp.begin() + kBthBytes + 4);
  EXPECT_EQ(decode(cnp), DecodeError::kBadLength) << "CNP with 12 reserved bytes";
  std::vector<uint8_t> middle = encode(Opcode::kSendMiddle, 256);
  middle.erase(middle.begin() + kBthBytes, middle.begin() + kBthBytes + 256);
  EXPECT_EQ(decode(middle), DecodeError::kBadLength) << "empty Middle segment";
  std::vector<uint8_t> odd = encode(Opcode::kSendOnly, 8);
  odd.insert(odd.begin() + kBthBytes, 1, 0);
  EXPECT_EQ(decode(odd), DecodeError::kBadLength) << "payload + pad not a multiple of 4";
  std::vector<uint8_t> big = encode(Opcode::kWriteOnly, kMaxPayloadBytes);
  big.insert(big.begin() + kBthBytes + kRethBytes, 4, 0);
  EXPECT_EQ(decode(big), DecodeError::kBadLength) << "payload above 4096";
  EXPECT_EQ(counters_.count(DecodeError::kBadLength), 6u);
}

TEST_F(RoceMalformed, IcrcMismatchOnAnyCoveredByte) {
  const std::vector<uint8_t> good = encode(Opcode::kWriteOnlyImm, 13);
  for (size_t i = 0; i < good.size(); ++i) {
    if (i == 4) continue;  // FECN/BECN/reserved are masked out of the ICRC
    std::vector<uint8_t> d = good;
    d[i] ^= (i == 1) ? 0x80 : 0x01;  // byte 1: flip SE, keep pad and TVer valid
    EXPECT_EQ(decode(d, false), DecodeError::kIcrcMismatch) << "byte " << i;
  }
  std::vector<uint8_t> becn = good;
  becn.at(4) ^= 0x40;
  EXPECT_EQ(decode(becn, false), DecodeError::kOk) << "BECN is not covered";
}

TEST_F(RoceMalformed, IcrcDependsOnTheIpDescription) {
  const std::vector<uint8_t> d = encode(Opcode::kSendOnly, 32);
  Packet pkt;
  IpUdpInfo other = ip_;
  other.dst_port = 4792;
  EXPECT_EQ(decode_datagram(d, &other, &pkt), DecodeError::kIcrcMismatch);
  other = ip_;
  other.tos = kEcnCe;
  other.ttl = 3;
  EXPECT_EQ(decode_datagram(d, &other, &pkt), DecodeError::kOk) << "TOS and TTL are masked";
  std::vector<uint8_t> bad = d;
  bad.back() ^= 1;
  EXPECT_EQ(decode_datagram(bad, nullptr, &pkt), DecodeError::kOk) << "nullptr skips the ICRC check";
}

TEST_F(RoceMalformed, ErrorNamesAreDistinct) {
  std::vector<std::string> names;
  for (int e = 0; e < static_cast<int>(DecodeError::kCount); ++e) {
    names.emplace_back(decode_error_name(static_cast<DecodeError>(e)));
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::unique(names.begin(), names.end()), names.end());
}

}  // namespace
}  // namespace rdmad::roce
