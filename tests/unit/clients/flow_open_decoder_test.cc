// kFlowOpen through the decoder across protocol versions: the 80-byte request of versions 1 and 2
// is still accepted at every version (nic_mask 0), the 88-byte one with a nic_mask only from
// version 3, and nothing else.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "rdmad/daemon/clients/request_decoder.h"

namespace rdmad::clients {
namespace {

using proto::MsgType;

// A kFlowOpen frame with the first `body_bytes` of `r` as its body, at `version`.
std::vector<std::byte> flow_open(const proto::FlowOpenRequest& r, size_t body_bytes, uint16_t version) {
  std::vector<std::byte> f(sizeof(proto::Header) + body_bytes);
  const proto::Header h = proto::make_header(version, static_cast<uint16_t>(MsgType::kFlowOpen),
                                             static_cast<uint32_t>(body_bytes), 3);
  std::memcpy(f.data(), &h, sizeof(h));
  std::memcpy(f.data() + sizeof(h), &r, std::min(body_bytes, sizeof(r)));
  return f;
}

proto::FlowOpenRequest request(uint32_t nic_mask) {
  proto::FlowOpenRequest r{};
  proto::copy_cstr(r.peer, "node-b");
  r.channel = 42;
  r.sq_depth = 64;
  r.cq_depth = 128;
  r.nic_mask = nic_mask;
  return r;
}

DecodedRequest decode(const std::vector<std::byte>& f, uint16_t version) { return decode_request(f, 0, false, version); }

TEST(FlowOpenDecoder, TheOldSizeRequestIsAcceptedAtEveryVersionAsEveryNic) {
  for (uint16_t v = proto::kVersionMin; v <= proto::kVersionMax; ++v) {
    const auto d = decode(flow_open(request(0), sizeof(proto::FlowOpenRequestV1), v), v);
    ASSERT_EQ(d.action, DecodeAction::kDispatch) << "version " << v << ": " << d.reason;
    const auto& r = std::get<proto::FlowOpenRequest>(d.body);
    EXPECT_STREQ(r.peer, "node-b");
    EXPECT_EQ(r.channel, 42u);
    EXPECT_EQ(r.sq_depth, 64u);
    EXPECT_EQ(r.cq_depth, 128u);
    EXPECT_EQ(r.nic_mask, 0u);
  }
}

TEST(FlowOpenDecoder, ANicMaskIsCarriedFromVersion3) {
  ASSERT_GE(proto::kVersionMax, proto::kVersionFlowNics);
  const auto d = decode(flow_open(request(0x2), sizeof(proto::FlowOpenRequest), proto::kVersionFlowNics),
                        proto::kVersionFlowNics);
  ASSERT_EQ(d.action, DecodeAction::kDispatch) << d.reason;
  EXPECT_EQ(std::get<proto::FlowOpenRequest>(d.body).nic_mask, 0x2u);
  EXPECT_EQ(std::get<proto::FlowOpenRequest>(d.body).channel, 42u);
}

TEST(FlowOpenDecoder, TheNewSizeBeforeVersion3IsAVersionError) {
  for (uint16_t v = proto::kVersionMin; v < proto::kVersionFlowNics; ++v) {
    const auto d = decode(flow_open(request(0x1), sizeof(proto::FlowOpenRequest), v), v);
    EXPECT_EQ(d.action, DecodeAction::kReplyError) << "version " << v;
    EXPECT_EQ(d.status, RDMAD_ERR_VERSION) << d.reason;
    EXPECT_NE(std::strstr(d.reason, "version 3"), nullptr) << d.reason;
  }
}

TEST(FlowOpenDecoder, OtherSizesAndAReservedFieldAreRefused) {
  for (size_t n : {size_t{0}, size_t{72}, size_t{84}, size_t{96}}) {
    const auto d = decode(flow_open(request(0), n, proto::kVersionMax), proto::kVersionMax);
    EXPECT_EQ(d.action, DecodeAction::kReplyError) << n << " bytes";
    EXPECT_EQ(d.status, RDMAD_ERR_PROTOCOL) << n << " bytes: " << d.reason;
  }
  proto::FlowOpenRequest r = request(0x1);
  r.reserved = 1;
  const auto d = decode(flow_open(r, sizeof(r), proto::kVersionMax), proto::kVersionMax);
  EXPECT_EQ(d.action, DecodeAction::kReplyError);
  EXPECT_EQ(d.status, RDMAD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(d.reason, "reserved"), nullptr) << d.reason;
}

}  // namespace
}  // namespace rdmad::clients
