// The flow frames on the wire: round trips, and short, trailing or impossible payloads rejected.
#include <gtest/gtest.h>

#include <functional>

#include "rdmad/daemon/peer/wire.h"

namespace rdmad::peer {
namespace {

Token token(uint8_t seed) {
  Token t;
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<uint8_t>(seed + i);
  return t;
}

// Every proper prefix and the payload with one byte more are rejected.
template <class Decode>
void expect_exact(const std::vector<uint8_t>& b, Decode decode) {
  for (size_t n = 0; n < b.size(); ++n)
    EXPECT_FALSE(decode(std::span(b).first(n)).has_value()) << "truncated to " << n;
  auto longer = b;
  longer.push_back(0);
  EXPECT_FALSE(decode(longer).has_value()) << "trailing byte";
}

Grant grant() {
  return Grant{.token = token(1),
               .iova = 0x7F00'0000'1000,
               .length = 1 << 20,
               .rights = verbs::kAccessRemoteWrite | verbs::kAccessRemoteRead,
               .channel_hint = 0xABCDEF0123456789,
               .keys = {{0, 0x11223344}, {3, 0xFFFFFFFF}}};
}

TEST(PeerWireFlow, GrantRoundTrip) {
  const Grant g = grant();
  const auto b = encode(g);
  EXPECT_EQ(b.size(), 16u + 8 + 8 + 4 + 8 + 1 + 2 * (2 + 4 + 8 + 1));
  EXPECT_EQ(decode_grant(b), g);
  expect_exact(b, [](std::span<const uint8_t> p) { return decode_grant(p); });
  Grant full = g;
  full.keys.clear();
  for (uint16_t i = 0; i < kMaxGrantKeys; ++i) full.keys.push_back({i, i * 7u});
  EXPECT_EQ(decode_grant(encode(full)), full) << "the maximum number of keys";
}

TEST(PeerWireFlow, GrantWithImpossibleValuesIsRejected) {
  const std::vector<std::pair<const char*, std::function<void(Grant&)>>> bad = {
      {"no key", [](Grant& g) { g.keys.clear(); }},
      {"too many keys",
       [](Grant& g) {
         g.keys.resize(kMaxGrantKeys + 1);
         for (uint16_t i = 0; i < g.keys.size(); ++i) g.keys[i].nic_index = i;
       }},
      {"two keys for one NIC", [](Grant& g) { g.keys[1].nic_index = g.keys[0].nic_index; }},
      {"no rights", [](Grant& g) { g.rights = 0; }},
      {"local write is no remote right", [](Grant& g) { g.rights |= verbs::kAccessLocalWrite; }},
      {"atomics are not granted", [](Grant& g) { g.rights = verbs::kAccessRemoteWrite | (1u << 3); }},
      {"empty range", [](Grant& g) { g.length = 0; }},
      {"range wraps", [](Grant& g) { g.iova = ~0ull - 10; }},
  };
  for (const auto& [why, mutate] : bad) {
    Grant g = grant();
    mutate(g);
    EXPECT_FALSE(decode_grant(encode(g)).has_value()) << why;
  }
  Grant read_only = grant();
  read_only.rights = verbs::kAccessRemoteRead;
  read_only.iova = ~0ull - 10;
  read_only.length = 11;  // ends exactly at the top of the address space
  EXPECT_EQ(decode_grant(encode(read_only)), read_only);
}

// A range the exporter's NIC holds as several MRs: every slice's rkey travels, and the slices must
// cover the range exactly.
TEST(PeerWireFlow, SlicedKeysRoundTripAndMustCoverTheRangeExactly) {
  Grant g = grant();
  g.length = 10000;
  g.keys = {{.nic_index = 0, .rkey = 0x10, .slice_bytes = 4096, .slice_rkeys = {0x11, 0x12}},
            {.nic_index = 1, .rkey = 0x20}};
  const auto b = encode(g);
  EXPECT_EQ(b.size(), 16u + 8 + 8 + 4 + 8 + 1 + (2 + 4 + 8 + 1 + 2 * 4) + (2 + 4 + 8 + 1));
  EXPECT_EQ(decode_grant(b), g);
  expect_exact(b, [](std::span<const uint8_t> p) { return decode_grant(p); });
  g.length = 8193;  // the third slice holds one byte
  EXPECT_EQ(decode_grant(encode(g)), g);
  g.length = 3 * 4096;  // three full slices
  EXPECT_EQ(decode_grant(encode(g)), g);
  Grant most = g;
  most.keys[0].slice_rkeys.assign(kMaxKeySlices - 1, 7);
  most.length = kMaxKeySlices * 4096;
  EXPECT_EQ(decode_grant(encode(most)), most) << "the most slices a key has";

  const std::vector<std::pair<const char*, std::function<void(Grant&)>>> bad = {
      {"more rkeys but no slice size", [](Grant& x) { x.keys[0].slice_bytes = 0; }},
      {"a slice size but one rkey", [](Grant& x) { x.keys[0].slice_rkeys.clear(); }},
      {"the range is longer than the slices", [](Grant& x) { x.length = 3 * 4096 + 1; }},
      {"the last slice is empty", [](Grant& x) { x.length = 2 * 4096; }},
      {"too many slices",
       [](Grant& x) {
         x.keys[0].slice_rkeys.assign(kMaxKeySlices, 7);
         x.length = (kMaxKeySlices + 1) * 4096;
       }},
      {"slices that wrap", [](Grant& x) { x.keys[0].slice_bytes = ~0ull / 2 + 1; }},
  };
  for (const auto& [why, mutate] : bad) {
    Grant x = g;
    mutate(x);
    EXPECT_FALSE(decode_grant(encode(x)).has_value()) << why;
  }
  RecvPost rp{.channel = 1, .recv_id = 2, .iova = 0x1000, .length = 5000,
              .keys = {{.nic_index = 2, .rkey = 1, .slice_bytes = 4096, .slice_rkeys = {2}}}};
  EXPECT_EQ(decode_recv_post(encode(rp)), rp);
  rp.length = 4096;
  EXPECT_FALSE(decode_recv_post(encode(rp)).has_value()) << "a receive's slices cover it exactly too";
}

TEST(PeerWireFlow, GrantAckAndRevokeRoundTrip) {
  const GrantAck ack{.token = token(9), .status = 0xDEADBEEF};
  const auto b = encode(ack);
  EXPECT_EQ(b.size(), 20u);
  EXPECT_EQ(decode_grant_ack(b), ack);
  expect_exact(b, [](std::span<const uint8_t> p) { return decode_grant_ack(p); });
  const Revoke r{.token = token(42)};
  const auto rb = encode(r);
  EXPECT_EQ(rb.size(), 16u);
  EXPECT_EQ(decode_revoke(rb), r);
  expect_exact(rb, [](std::span<const uint8_t> p) { return decode_revoke(p); });
}

TEST(PeerWireFlow, RecvPostRoundTripAndValidation) {
  const RecvPost m{.session = 0x11223344,
                   .seq = 0x0A0B0C0D0E0F1011,
                   .channel = 5,
                   .owner_uid = 0x89ABCDEF,
                   .recv_id = 0x0102030405060708,
                   .iova = 0x1000,
                   .length = 65536,
                   .keys = {{1, 77}}};
  const auto b = encode(m);
  // session, seq, channel, owner uid, recv id, iova, length; one key (u8 count, u16 nic, u32 rkey,
  // u64 slice bytes, u8 more).
  EXPECT_EQ(b.size(), 4u + 8 + 8 + 4 + 8 + 8 + 8 + 1 + 2 + 4 + 8 + 1);
  EXPECT_EQ((std::vector<uint8_t>(b.begin(), b.begin() + 4)), (std::vector<uint8_t>{0x11, 0x22, 0x33, 0x44}));
  EXPECT_EQ((std::vector<uint8_t>(b.begin() + 20, b.begin() + 24)), (std::vector<uint8_t>{0x89, 0xAB, 0xCD, 0xEF}));
  EXPECT_EQ(decode_recv_post(b), m);
  expect_exact(b, [](std::span<const uint8_t> p) { return decode_recv_post(p); });
  RecvPost x = m;
  x.keys.clear();
  EXPECT_FALSE(decode_recv_post(encode(x)).has_value()) << "no key";
  x = m;
  x.length = 0;
  EXPECT_FALSE(decode_recv_post(encode(x)).has_value()) << "empty buffer";
  x = m;
  x.iova = ~0ull;
  EXPECT_FALSE(decode_recv_post(encode(x)).has_value()) << "range wraps";
}

TEST(PeerWireFlow, SendDoneRoundTripKeepsANegativeStatus) {
  const SendDone m{.channel = 1, .recv_id = 2, .bytes = 3ull << 40, .status = -5};
  const auto b = encode(m);
  EXPECT_EQ(b.size(), 28u);
  EXPECT_EQ(decode_send_done(b), m);
  expect_exact(b, [](std::span<const uint8_t> p) { return decode_send_done(p); });
}

TEST(PeerWireFlow, LaneMailIsAKindByteAndTheMessage) {
  const SendDone done{.channel = 1, .recv_id = 2, .bytes = 3, .status = -5};
  const auto d = encode_mail(done);
  ASSERT_EQ(d.size(), 1u + 28);
  EXPECT_EQ(d[0], static_cast<uint8_t>(MailKind::kSendDone));
  EXPECT_EQ(decode_mail(d), Mail{done});
  RecvPost post{.session = 9, .seq = 10, .channel = 5, .recv_id = 7, .iova = 0, .length = 64, .keys = {}};
  for (uint16_t nic = 0; nic < 13; ++nic) post.keys.push_back({nic, 100u + nic});
  const auto p = encode_mail(post);
  EXPECT_EQ(p[0], static_cast<uint8_t>(MailKind::kRecvPost));
  EXPECT_EQ(decode_mail(p), Mail{post});
  EXPECT_LE(p.size(), kMailBytes) << "a receive on 13 NICs (keys without slices) fits a lane message";
  std::vector<uint8_t> bad = d;
  bad[0] = 3;
  EXPECT_FALSE(decode_mail(bad).has_value()) << "unknown kind";
  bad = p;
  bad[0] = static_cast<uint8_t>(MailKind::kSendDone);
  EXPECT_FALSE(decode_mail(bad).has_value()) << "a recv post read as a send-done";
  const RecvCancel cancel{.session = 9, .seq = 10, .channel = 5, .owner_uid = 1000, .recv_id = 7};
  const auto c = encode_mail(cancel);
  ASSERT_EQ(c.size(), 1u + 4 + 8 + 8 + 4 + 8);  // kind, session, seq, channel, owner uid, recv id
  EXPECT_EQ(c[0], static_cast<uint8_t>(MailKind::kRecvCancel));
  EXPECT_EQ(decode_mail(c), Mail{cancel});
  EXPECT_EQ(decode_recv_cancel(std::span<const uint8_t>(c).subspan(1)), cancel);
  expect_exact(encode(cancel), [](std::span<const uint8_t> b) { return decode_recv_cancel(b); });
  for (const Mail& m : {Mail{done}, Mail{post}, Mail{cancel}})
    EXPECT_EQ(decode_mail_frame(frame_type(m), encode(m)), m) << "as a control frame, kind " << m.index() + 1;
  EXPECT_EQ(frame_type(Mail{post}), MessageType::kRecvPost);
  EXPECT_FALSE(decode_mail_frame(MessageType::kGrant, encode(Mail{done})).has_value());
  EXPECT_FALSE(decode_mail({}).has_value());
  EXPECT_FALSE(decode_mail(std::span<const uint8_t>(d).first(1)).has_value()) << "kind only";
}

TEST(PeerWireFlow, RecvQueryAndStateRoundTrip) {
  const RecvQuery q{.channel = 5, .recv_id = 7ull << 32 | 3, .nic_index = 2, .qp_num = 0x123456};
  const auto b = encode(q);
  EXPECT_EQ(b.size(), 22u);
  // Version 9: the receiver's QP number follows the NIC index, big-endian.
  EXPECT_EQ(std::vector<uint8_t>(b.end() - 4, b.end()), (std::vector<uint8_t>{0x00, 0x12, 0x34, 0x56}));
  EXPECT_EQ(decode_recv_query(b), q);
  expect_exact(b, [](std::span<const uint8_t> p) { return decode_recv_query(p); });
  for (auto kind : {RecvStateKind::kPending, RecvStateKind::kPlaced, RecvStateKind::kUnknown}) {
    const RecvState st{.recv_id = q.recv_id, .state = kind};
    const auto e = encode(st);
    EXPECT_EQ(e.size(), 9u);
    EXPECT_EQ(decode_recv_state(e), st);
    expect_exact(e, [](std::span<const uint8_t> p) { return decode_recv_state(p); });
  }
  auto bad = encode(RecvState{.recv_id = 1, .state = RecvStateKind::kUnknown});
  bad.back() = 3;
  EXPECT_FALSE(decode_recv_state(bad).has_value()) << "no such answer";
  EXPECT_FALSE(flow_payload_valid(MessageType::kRecvState, bad));
  EXPECT_TRUE(flow_payload_valid(MessageType::kRecvQuery, b));
}

TEST(PeerWireFlow, FlowTypesAreKnownAndValidatedByType) {
  for (uint16_t t = 7; t <= 15; ++t) EXPECT_TRUE(is_known(t)) << t;
  EXPECT_FALSE(is_known(16));
  // The idle request is empty.
  EXPECT_TRUE(flow_payload_valid(MessageType::kIdle, {}));
  const uint8_t one[1] = {0};
  EXPECT_FALSE(flow_payload_valid(MessageType::kIdle, one));
  EXPECT_TRUE(flow_payload_valid(MessageType::kGrant, encode(grant())));
  EXPECT_FALSE(flow_payload_valid(MessageType::kGrant, encode(Revoke{})));
  EXPECT_FALSE(flow_payload_valid(MessageType::kSendDone, {}));
  EXPECT_TRUE(flow_payload_valid(MessageType::kPing, {})) << "not a flow frame: checked elsewhere";
  EXPECT_STREQ(to_string(MessageType::kRecvPost), "recv post");
  EXPECT_STREQ(to_string(MessageType::kRecvCancel), "recv cancel");
  EXPECT_FALSE(flow_payload_valid(MessageType::kRecvCancel, {}));
}

TEST(PeerWireFlow, RebuildEndpointsCarryTheNicIndexAndTheCause) {
  NicEndpoint e;
  e.nic_name = "soft1";
  e.nic_index = 1;
  e.mtu_bytes = 4096;
  for (EndpointsKind kind : {EndpointsKind::kRebuildOffer, EndpointsKind::kRebuildAnswer, EndpointsKind::kRebuildAck}) {
    for (RebuildCause cause : {RebuildCause::kPathFault, RebuildCause::kRequestRefused}) {
      const Endpoints m{.kind = kind, .session = 3, .nic_index = 1, .cause = cause, .endpoints = {e}};
      auto b = encode(m);
      const auto d = decode_endpoints(b);
      ASSERT_TRUE(d.has_value());
      EXPECT_EQ(d->kind, kind);
      EXPECT_EQ(d->nic_index, 1);
      EXPECT_EQ(d->cause, cause);
      EXPECT_EQ(d->endpoints, m.endpoints);
      expect_exact(b, [](std::span<const uint8_t> p) { return decode_endpoints(p); });
      ASSERT_EQ(b[7], static_cast<uint8_t>(cause)) << "kind, session, NIC index, then the cause";
      b[7] = 2;
      EXPECT_FALSE(decode_endpoints(b).has_value()) << "unknown cause";
    }
  }
  const auto empty =
      encode(Endpoints{.kind = EndpointsKind::kRebuildAck, .session = 3, .nic_index = 2, .endpoints = {}});
  EXPECT_EQ(empty.size(), 1u + 4 + 2 + 1 + 1);
  EXPECT_EQ(decode_endpoints(empty)->nic_index, 2);
  EXPECT_EQ(encode(Endpoints{}).size(), 1u + 4 + 1) << "bring-up kinds carry no NIC index or cause";
}

}  // namespace
}  // namespace rdmad::peer
