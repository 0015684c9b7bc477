// What the library sends to open a flow, by the daemon's protocol version: the 80-byte request of
// versions 1 and 2 for an unpinned flow (any daemon reads it), the 88-byte one with the nic_mask
// only to a version 3 daemon, and nothing at all for a pinned flow an older daemon cannot serve.
#include <gtest/gtest.h>

#include <future>

#include "fake_daemon.h"
#include "rdmad/rdmad.h"

namespace rdmad::test {
namespace {

// Answers the hello on `c` with `version` (2 and up: with a session token).
bool answer_hello_as(int c, uint16_t version) {
  Frame f;
  if (!FakeDaemon::read_frame(c, &f) || f.header.type != static_cast<uint16_t>(proto::MsgType::kHello)) return false;
  proto::HelloReplyV2 h{version, 0, static_cast<uint32_t>(proto::kMaxFrameBytes), 0x77, {1, 2, 3}};
  return FakeDaemon::reply(c, f, &h, version >= proto::kVersionSessions ? sizeof(h) : sizeof(proto::HelloReply));
}

struct OpenSeen {
  bool ok = false;
  Frame frame;
};

// Connects a client to a daemon of `version`, opens a flow with `nic_mask` and returns what the
// daemon received (it answers with a ring of its own).
OpenSeen open_against(uint16_t version, uint32_t nic_mask, rdmad_status* status, std::string* error) {
  FakeDaemon daemon;
  FakeFlow ring{16, 32, 9, ring::FlowState::kConnected};
  int conn = -1;
  auto side = std::async(std::launch::async, [&] {
    OpenSeen seen;
    conn = daemon.accept_one();
    if (conn < 0 || !answer_hello_as(conn, version)) return seen;
    seen.ok = ring.answer_open(conn, &seen.frame);  // false at the client's EOF: it sent nothing
    return seen;
  });
  rdmad_client* client = nullptr;
  EXPECT_EQ(rdmad_connect(daemon.path().c_str(), &client), RDMAD_OK) << rdmad_last_error(nullptr);
  rdmad_flow* flow = nullptr;
  *status = rdmad_flow_open_nics(client, "node-b", nullptr, nic_mask, &flow);
  *error = rdmad_last_error(client);
  if (flow == nullptr) {  // the daemon may still wait for a request: the client's end tells it none comes
    rdmad_disconnect(client);
    return side.get();
  }
  OpenSeen seen = side.get();
  EXPECT_EQ(rdmad_flow_nic_mask(flow), nic_mask);
  daemon.die_leaving_socket_file();  // nobody would answer the flow's close
  rdmad_flow_close(flow);
  rdmad_disconnect(client);
  return seen;
}

TEST(ClientFlowOpenVersion, AnUnpinnedFlowSendsTheOldSizeRequestToEveryDaemon) {
  for (uint16_t v = proto::kVersionMin; v <= proto::kVersionMax; ++v) {
    rdmad_status s;
    std::string why;
    const OpenSeen seen = open_against(v, 0, &s, &why);
    EXPECT_EQ(s, RDMAD_OK) << "version " << v << ": " << why;
    ASSERT_TRUE(seen.ok) << "version " << v;
    EXPECT_EQ(seen.frame.body.size(), sizeof(proto::FlowOpenRequestV1)) << "version " << v;
  }
}

TEST(ClientFlowOpenVersion, APinnedFlowSendsItsMaskToAVersion3Daemon) {
  rdmad_status s;
  std::string why;
  const OpenSeen seen = open_against(proto::kVersionFlowNics, 0x2, &s, &why);
  EXPECT_EQ(s, RDMAD_OK) << why;
  ASSERT_TRUE(seen.ok);
  ASSERT_EQ(seen.frame.body.size(), sizeof(proto::FlowOpenRequest));
  proto::FlowOpenRequest r;
  std::memcpy(&r, seen.frame.body.data(), sizeof(r));
  EXPECT_EQ(r.nic_mask, 0x2u);
  EXPECT_EQ(r.reserved, 0u);
  EXPECT_STREQ(r.peer, "node-b");
}

TEST(ClientFlowOpenVersion, APinnedFlowIsNotSupportedByAnOlderDaemonAndNothingIsSent) {
  for (uint16_t v = proto::kVersionMin; v < proto::kVersionFlowNics; ++v) {
    rdmad_status s;
    std::string why;
    const OpenSeen seen = open_against(v, 0x1, &s, &why);
    EXPECT_EQ(s, RDMAD_ERR_NOT_SUPPORTED) << "version " << v;
    EXPECT_NE(why.find("need version 3"), std::string::npos) << why;
    EXPECT_FALSE(seen.ok) << "version " << v << ": the daemon got a request";
  }
}

}  // namespace
}  // namespace rdmad::test
