// The peer wire format: round trips, and every malformed input is rejected (never read past the end).
#include <gtest/gtest.h>

#include "rdmad/daemon/peer/wire.h"

namespace rdmad::peer {
namespace {

std::span<const uint8_t, kHeaderBytes> head(const std::vector<uint8_t>& f) {
  return std::span<const uint8_t, kHeaderBytes>(f.data(), kHeaderBytes);
}

TEST(PeerWire, FrameHeaderRoundTripAndValidation) {
  const std::vector<uint8_t> payload = {1, 2, 3};
  auto f = encode_frame(MessageType::kPing, payload);
  ASSERT_EQ(f.size(), kHeaderBytes + 3);
  EXPECT_EQ(f[0], 0);
  EXPECT_EQ(f[3], 3) << "big-endian length";
  std::string err;
  auto h = decode_header(head(f), 1024, &err);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->length, 3u);
  EXPECT_EQ(h->type, static_cast<uint16_t>(MessageType::kPing));

  EXPECT_FALSE(decode_header(head(f), 2, &err).has_value()) << "longer than the limit";
  EXPECT_NE(err.find("exceeds"), std::string::npos);
  auto bad = f;
  bad[5] = 99;
  EXPECT_FALSE(decode_header(head(bad), 1024, &err).has_value());
  EXPECT_NE(err.find("unknown frame type"), std::string::npos);
  bad = f;
  bad[7] = 1;
  EXPECT_FALSE(decode_header(head(bad), 1024, &err).has_value());
  const std::vector<uint8_t> http = {'G', 'E', 'T', ' ', '/', ' ', 'H', 'T'};
  EXPECT_FALSE(decode_header(head(http), 1 << 16, &err).has_value()) << "a stranger speaking HTTP";
}

TEST(PeerWire, HelloRoundTrip) {
  Hello h;
  h.node_id = "node-a";
  auto b = encode(h);
  // magic, version 9, flags 0, id length, id.
  const std::vector<uint8_t> want = {'R', 'D', 'M', 'P', 0, 9, 0, 6, 'n', 'o', 'd', 'e', '-', 'a'};
  EXPECT_EQ(b, want);
  auto d = decode_hello(b);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->node_id, "node-a");
  std::vector<uint8_t> flagged = b;
  flagged[6] = 1;  // version 2's "I have a key" bit: reserved now
  EXPECT_FALSE(decode_hello(flagged).has_value());
  for (size_t n = 0; n < b.size(); ++n) {
    auto t = decode_hello(std::span(b).first(n));
    EXPECT_TRUE(!t.has_value() || t->magic != kMagic) << "truncated to " << n;
  }
  b.push_back(0);
  EXPECT_FALSE(decode_hello(b).has_value()) << "trailing bytes";
}

TEST(PeerWire, HelloOfAStrangerOrAnotherVersionIsReadAsSuch) {
  Hello h;
  h.node_id = "x";
  h.magic = 0x48545450;
  auto d = decode_hello(encode(h));
  ASSERT_TRUE(d.has_value());
  EXPECT_NE(d->magic, kMagic);
  h.magic = kMagic;
  h.version = 9;
  d = decode_hello(encode(h));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->version, 9);
  h.version = kVersion;
  h.node_id = "";
  EXPECT_FALSE(decode_hello(encode(h)).has_value()) << "empty node id";
  h.node_id = std::string(kMaxNodeIdBytes + 1, 'n');
  EXPECT_FALSE(decode_hello(encode(h)).has_value()) << "node id too long";
}

TEST(PeerWire, EndpointsRoundTrip) {
  Endpoints m;
  m.kind = EndpointsKind::kAnswer;
  m.session = 0xA1B2C3D4;
  for (uint16_t i = 0; i < 3; ++i) {
    NicEndpoint e;
    e.nic_name = "soft" + std::to_string(i);
    e.nic_index = i;
    e.qp_index = static_cast<uint16_t>(i + 1);
    e.gid = *verbs::Gid::from_ip("10.0.0." + std::to_string(i + 1));
    e.udp_port = static_cast<uint16_t>(4791 + i);
    e.qpn = 0xABCDEF - i;
    e.psn = 0x123456 + i;
    e.mtu_bytes = 1024u << i;
    m.endpoints.push_back(e);
  }
  auto b = encode(m);
  auto d = decode_endpoints(b);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, EndpointsKind::kAnswer);
  EXPECT_EQ(d->session, m.session);
  EXPECT_EQ(d->endpoints, m.endpoints);
  for (size_t n = 0; n < b.size(); ++n) EXPECT_FALSE(decode_endpoints(std::span(b).first(n)).has_value()) << n;
}

TEST(PeerWire, EndpointsWithImpossibleValuesAreRejected) {
  Endpoints m;
  NicEndpoint e;
  e.nic_name = "soft0";
  e.mtu_bytes = 1024;
  m.endpoints.push_back(e);
  ASSERT_TRUE(decode_endpoints(encode(m)).has_value());
  for (uint32_t mtu : {0u, 255u, 1000u, 8192u}) {
    m.endpoints[0].mtu_bytes = mtu;
    EXPECT_FALSE(decode_endpoints(encode(m)).has_value()) << "mtu " << mtu;
  }
  m.endpoints[0].mtu_bytes = 1024;
  m.endpoints[0].qpn = 1u << 24;
  EXPECT_FALSE(decode_endpoints(encode(m)).has_value()) << "QPNs are 24 bits";
  m.endpoints[0].qpn = 1;
  m.endpoints[0].psn = 1u << 24;
  EXPECT_FALSE(decode_endpoints(encode(m)).has_value()) << "PSNs are 24 bits";
  auto b = encode(Endpoints{});
  b[0] = 6;
  EXPECT_FALSE(decode_endpoints(b).has_value()) << "unknown kind";
}

// InfiniBand ends carry their port's LID (the peer routes to it), RoCE ends none.
TEST(PeerWire, EndpointsCarryTheLinkAndAnInfinibandLid) {
  Endpoints m;
  NicEndpoint e;
  e.nic_name = "ib0";
  e.link = EndpointLink::kInfiniband;
  e.gid = *verbs::Gid::from_ip("fe80::e41d:2d03:a:1b30");
  e.lid = 0x2a;
  e.mtu_bytes = 4096;
  m.endpoints.push_back(e);
  auto d = decode_endpoints(encode(m));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->endpoints, m.endpoints);
  EXPECT_EQ(d->endpoints[0].link, EndpointLink::kInfiniband);
  EXPECT_EQ(d->endpoints[0].lid, 0x2a);
  m.endpoints[0].lid = kMaxUnicastLid;
  EXPECT_TRUE(decode_endpoints(encode(m)).has_value()) << "the largest unicast LID";
  for (uint16_t lid : {uint16_t{0}, uint16_t{0xc000}, uint16_t{0xffff}}) {
    m.endpoints[0].lid = lid;
    EXPECT_FALSE(decode_endpoints(encode(m)).has_value()) << "InfiniBand LID " << lid;
  }
  m.endpoints[0].link = EndpointLink::kRoce;
  m.endpoints[0].lid = 5;
  EXPECT_FALSE(decode_endpoints(encode(m)).has_value()) << "a RoCE end has no LID";
  m.endpoints[0].lid = 0;
  auto b = encode(m);
  EXPECT_TRUE(decode_endpoints(b).has_value());
  // kind, session, count, name length + "ib0", nic index, qp index: the link byte follows.
  b[1 + 4 + 1 + 1 + 3 + 2 + 2] = 2;
  EXPECT_FALSE(decode_endpoints(b).has_value()) << "an unknown link";
}

// [flow] qps_per_lane: k QPs per NIC are k endpoints of that NIC, told apart by their QP index
// (a field since version 1, at a fixed place: a daemon that predates the key reads them alike).
Endpoints several_qps_per_nic(uint16_t nics, uint16_t qps_per_nic) {
  Endpoints m;
  m.kind = EndpointsKind::kOffer;
  m.session = 7;
  for (uint16_t n = 0; n < nics; ++n) {
    for (uint16_t j = 0; j < qps_per_nic; ++j) {
      NicEndpoint e;
      e.nic_name = "soft" + std::to_string(n);
      e.nic_index = n;
      e.qp_index = j;
      e.gid = *verbs::Gid::from_ip("10.0.0." + std::to_string(n + 1));
      e.udp_port = 4791;
      e.qpn = 0x100u * (n + 1) + j;
      e.psn = 0x1000u + j;
      e.mtu_bytes = 4096;
      m.endpoints.push_back(e);
    }
  }
  return m;
}

TEST(PeerWire, EndpointsCarrySeveralQpsPerNic) {
  const Endpoints m = several_qps_per_nic(2, 4);
  const auto b = encode(m);
  // kind, session, count: 8 endpoints; the first one's QP index right after its name and NIC index.
  EXPECT_EQ(b[5], 8);
  const size_t first_qp_index = 1 + 4 + 1 + 1 + 5 + 2;
  EXPECT_EQ(b[first_qp_index], 0);
  EXPECT_EQ(b[first_qp_index + 1], 0);
  auto d = decode_endpoints(b);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->endpoints, m.endpoints);
  for (size_t i = 0; i < d->endpoints.size(); ++i) {
    EXPECT_EQ(d->endpoints[i].nic_index, i / 4);
    EXPECT_EQ(d->endpoints[i].qp_index, i % 4);
  }
  // The most one message carries: 255 (its count is a byte), e.g. 15 NICs x 17 QPs.
  const Endpoints most = several_qps_per_nic(15, 17);
  ASSERT_EQ(most.endpoints.size(), kMaxEndpoints);
  auto all = decode_endpoints(encode(most));
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(all->endpoints, most.endpoints);
}

// A QP named twice in one message is malformed: the receiver pairs each of its QPs with the peer's
// QP of the same NIC and index, and there must be one.
TEST(PeerWire, EndpointsNamingOneQpTwiceAreRejected) {
  Endpoints m = several_qps_per_nic(2, 2);
  ASSERT_TRUE(decode_endpoints(encode(m)).has_value()) << "the same QP index on two NICs is fine";
  m.endpoints[1].qp_index = 0;  // NIC 0's QPs: 0 and 0
  EXPECT_FALSE(decode_endpoints(encode(m)).has_value());
  m = several_qps_per_nic(2, 2);
  m.endpoints.push_back(m.endpoints.front());  // the very same endpoint again, last
  EXPECT_FALSE(decode_endpoints(encode(m)).has_value());
  m.endpoints.back().qpn = 0x777;  // another QP under the same (nic, qp index)
  EXPECT_FALSE(decode_endpoints(encode(m)).has_value());
  m.kind = EndpointsKind::kRebuildAnswer;
  EXPECT_FALSE(decode_endpoints(encode(m)).has_value()) << "rebuild messages too";
}

TEST(PeerWireDeathTest, EncodingMoreEndpointsThanTheCountHoldsIsABug) {
  const Endpoints m = several_qps_per_nic(16, 16);
  EXPECT_DEATH((void)encode(m), "256 endpoints in one message");
}

TEST(PeerWire, PingIsExactlyEightBytes) {
  auto b = encode(Ping{0x0102030405060708ull});
  ASSERT_EQ(b.size(), 8u);
  EXPECT_EQ(decode_ping(b)->seq, 0x0102030405060708ull);
  b.push_back(0);
  EXPECT_FALSE(decode_ping(b).has_value());
}

}  // namespace
}  // namespace rdmad::peer
