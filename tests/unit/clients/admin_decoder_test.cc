// The admin requests (rdmactl) through the decoder: well-formed bodies dispatch, every malformed
// field is an error reply (never a closed connection), and sizes match the protocol header.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "rdmad/daemon/clients/request_decoder.h"

namespace rdmad::clients {
namespace {

using proto::MsgType;

template <class Body>
std::vector<std::byte> frame(MsgType type, const Body* body) {
  const size_t n = body ? sizeof(Body) : 0;
  std::vector<std::byte> f(sizeof(proto::Header) + n);
  proto::Header h = proto::make_header(1, static_cast<uint16_t>(type), static_cast<uint32_t>(n), 7);
  std::memcpy(f.data(), &h, sizeof(h));
  if (body) std::memcpy(f.data() + sizeof(h), body, n);
  return f;
}

template <class Body>
DecodedRequest decode(MsgType type, const Body& body) {
  auto f = frame(type, &body);
  return decode_request(f, 0, false, 1);
}

proto::CcSetRequest one_knob(const char* name, int64_t value) {
  proto::CcSetRequest r{};
  r.count = 1;
  proto::copy_cstr(r.knobs[0].name, name);
  r.knobs[0].value = value;
  return r;
}

void expect_error(const DecodedRequest& d, const char* reason_part) {
  EXPECT_EQ(d.action, DecodeAction::kReplyError) << reason_part;
  EXPECT_EQ(d.status, RDMAD_ERR_INVALID_ARGUMENT) << d.reason;
  EXPECT_NE(std::strstr(d.reason, reason_part), nullptr) << d.reason;
}

TEST(AdminDecoder, TypesAreAdminAndHaveFixedBodies) {
  for (uint16_t t = 14; t <= 22; ++t) EXPECT_TRUE(proto::is_admin_request(t)) << t;
  EXPECT_FALSE(proto::is_admin_request(13));
  EXPECT_FALSE(proto::is_admin_request(23));
  EXPECT_EQ(proto::request_body_bytes(14), long{sizeof(proto::ListRequest)});
  EXPECT_EQ(proto::request_body_bytes(15), long{sizeof(proto::ListRequest)});
  EXPECT_EQ(proto::request_body_bytes(16), long{sizeof(proto::CcShowRequest)});
  EXPECT_EQ(proto::request_body_bytes(17), long{sizeof(proto::CcSetRequest)});
  EXPECT_EQ(proto::request_body_bytes(18), 0);
  EXPECT_EQ(proto::request_body_bytes(19), long{sizeof(proto::NicDetailsRequest)});
  EXPECT_EQ(proto::request_body_bytes(20), long{sizeof(proto::ListRequest)});  // peers
  EXPECT_EQ(proto::request_body_bytes(21), long{sizeof(proto::ListRequest)});  // gids
  EXPECT_EQ(proto::request_body_bytes(22), 0);                                  // status
  EXPECT_EQ(proto::request_body_bytes(23), long{sizeof(proto::ResumeRequest)});
  EXPECT_EQ(proto::request_body_bytes(24), long{sizeof(proto::QueryRegistrationRequest)});
  EXPECT_EQ(proto::request_body_bytes(25), 0);  // node id: for every client, not admin
  EXPECT_EQ(proto::request_body_bytes(26), -1);
  EXPECT_FALSE(proto::is_admin_request(23));
  EXPECT_FALSE(proto::is_admin_request(25));
}

TEST(AdminDecoder, WellFormedRequestsDispatch) {
  auto flows = decode(MsgType::kListFlows, proto::ListRequest{5, 24, 0});
  ASSERT_EQ(flows.action, DecodeAction::kDispatch) << flows.reason;
  EXPECT_EQ(std::get<proto::ListRequest>(flows.body).after_handle, 5u);
  auto regs = decode(MsgType::kListAllRegistrations, proto::ListRequest{0, 40, 0});
  EXPECT_EQ(regs.action, DecodeAction::kDispatch) << regs.reason;
  proto::CcShowRequest show{};
  show.cursor = 3;
  EXPECT_EQ(decode(MsgType::kCcShow, show).action, DecodeAction::kDispatch);
  proto::copy_cstr(show.nic, "rail0");
  show.cursor = 0;
  EXPECT_EQ(decode(MsgType::kCcShow, show).action, DecodeAction::kDispatch);
  auto set = decode(MsgType::kCcSet, one_knob("rpg_ai_rate", 10));
  ASSERT_EQ(set.action, DecodeAction::kDispatch) << set.reason;
  EXPECT_EQ(std::get<proto::CcSetRequest>(set.body).knobs[0].value, 10);
  auto f = frame<proto::ListRequest>(MsgType::kReload, nullptr);
  EXPECT_EQ(decode_request(f, 0, false, 1).action, DecodeAction::kDispatch);
}

TEST(AdminDecoder, ListPagesAreBounded) {
  expect_error(decode(MsgType::kListFlows, proto::ListRequest{0, 0, 0}), "1..24");
  expect_error(decode(MsgType::kListFlows, proto::ListRequest{0, 25, 0}), "1..24");
  expect_error(decode(MsgType::kListFlows, proto::ListRequest{0, 8, 1}), "reserved");
  expect_error(decode(MsgType::kListAllRegistrations, proto::ListRequest{0, 41, 0}), "1..40");
  EXPECT_EQ(decode(MsgType::kListPeers, proto::ListRequest{3, 8, 0}).action, DecodeAction::kDispatch);
  expect_error(decode(MsgType::kListPeers, proto::ListRequest{0, 9, 0}), "list_peers: max_entries must be 1..8");
  expect_error(decode(MsgType::kListPeers, proto::ListRequest{0, 1, 1}), "list_peers: reserved");
  EXPECT_EQ(decode(MsgType::kListGids, proto::ListRequest{0, 32, 0}).action, DecodeAction::kDispatch);
  expect_error(decode(MsgType::kListGids, proto::ListRequest{0, 0, 0}), "list_gids: max_entries must be 1..32");
  expect_error(decode(MsgType::kListGids, proto::ListRequest{0, 1, 7}), "list_gids: reserved");
}

TEST(AdminDecoder, CcShowFieldsAreChecked) {
  proto::CcShowRequest r{};
  std::memset(r.nic, 'a', sizeof(r.nic));
  expect_error(decode(MsgType::kCcShow, r), "NUL");
  r = {};
  r.reserved = 1;
  expect_error(decode(MsgType::kCcShow, r), "reserved");
  r = {};
  proto::copy_cstr(r.nic, "rail0");
  r.cursor = 1;
  expect_error(decode(MsgType::kCcShow, r), "cursor");
}

TEST(AdminDecoder, CcSetFieldsAreChecked) {
  auto r = one_knob("rpg_ai_rate", 1);
  r.count = 0;
  expect_error(decode(MsgType::kCcSet, r), "count");
  r.count = proto::kMaxCcSetKnobs + 1;
  expect_error(decode(MsgType::kCcSet, r), "count");
  r = one_knob("", 1);
  expect_error(decode(MsgType::kCcSet, r), "non-empty");
  r = one_knob("x", 1);
  std::memset(r.knobs[0].name, 'k', sizeof(r.knobs[0].name));
  expect_error(decode(MsgType::kCcSet, r), "NUL-terminated");
  r = one_knob("rpg_ai_rate", 1);
  r.knobs[0].flags = 1;
  expect_error(decode(MsgType::kCcSet, r), "flags");
  r = one_knob("rpg_ai_rate", 1);
  r.knobs[1].value = 5;  // beyond count
  expect_error(decode(MsgType::kCcSet, r), "after count");
  r = one_knob("rpg_ai_rate", 1);
  r.count = 2;
  proto::copy_cstr(r.knobs[1].name, "rpg_ai_rate");
  expect_error(decode(MsgType::kCcSet, r), "twice");
  r = one_knob("rpg_ai_rate", 1);
  std::memset(r.nic, 'n', sizeof(r.nic));
  expect_error(decode(MsgType::kCcSet, r), "nic");
  r = one_knob("rpg_ai_rate", 1);
  r.reserved = 2;
  expect_error(decode(MsgType::kCcSet, r), "reserved");
}

TEST(AdminDecoder, WrongBodyLengthIsAProtocolErrorNotAClose) {
  std::vector<std::byte> f = frame<proto::ListRequest>(MsgType::kReload, nullptr);
  f.resize(f.size() + 8);
  proto::Header h;
  std::memcpy(&h, f.data(), sizeof(h));
  h.length = 8;
  std::memcpy(f.data(), &h, sizeof(h));
  auto d = decode_request(f, 0, false, 1);
  EXPECT_EQ(d.action, DecodeAction::kReplyError);
  EXPECT_EQ(d.status, RDMAD_ERR_PROTOCOL);
}

}  // namespace
}  // namespace rdmad::clients
