// Nothing a client puts in its flow ring can bring down a node-to-node session: while another
// user's client floods its ring with requests the daemon must refuse (a zero-length receive among
// them, which the peer daemon used to treat as a protocol error and drop the whole session for),
// root's 32 MiB WRITE between the same two nodes completes byte-exact and the session stays up.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>

#include "integration/flow/flow_cluster.h"
#include "security/local_users.h"

namespace rdmad::security {
namespace {

using namespace std::chrono_literals;
using test::Buffer;

constexpr size_t kBytes = 32 << 20;

TEST(RingEntries, BadRequestsOfOneUserFailAloneAndAnotherUsersTransferCompletes) {
  test::Pair pair(open_node("node-a", 31), open_node("node-b", 33));
  ASSERT_TRUE(pair.start());
  open_to_others(pair.a->socket_path());
  Buffer src(pair.a->client(), kBytes, test::kAllAccess);
  Buffer dst(pair.b->client(), kBytes, test::kAllAccess);
  for (size_t i = 0; i < kBytes; ++i) src.data()[i] = static_cast<uint8_t>(i * 13 + 1);
  std::memset(dst.data(), 0, kBytes);
  rdmad_token token{};
  ASSERT_EQ(rdmad_export(pair.b->client(), dst.mr, 0, kBytes, "node-a", RDMAD_ACCESS_REMOTE_WRITE, &token), RDMAD_OK)
      << rdmad_last_error(pair.b->client());
  rdmad_flow* flow = nullptr;
  ASSERT_EQ(rdmad_flow_open(pair.a->client(), "node-b", nullptr, &flow), RDMAD_OK);
  ASSERT_EQ(rdmad_flow_wait_connected(flow, 10000), RDMAD_OK);
  rdmad_remote remote{};
  ASSERT_EQ(rdmad_flow_import(flow, &token, &remote), RDMAD_OK);

  // The other user starts first and keeps going through the whole transfer.
  test::Subprocess abuser({test::binary("tests/security/access/security_ring_abuser"), pair.a->socket_path(), "node-b",
                           std::to_string(kNobody), "3"});
  // Eight 4 MiB writes, one after the other, while the abuser floods.
  constexpr size_t kPart = kBytes / 8;
  for (size_t i = 0; i < 8; ++i) {
    ASSERT_EQ(rdmad_flow_write(flow, i, src.mr, i * kPart, &remote, i * kPart, kPart), RDMAD_OK);
    auto c = test::wait_completion(flow, 30s);
    ASSERT_TRUE(c.has_value()) << "write " << i << " never completed\n" << pair.a->output();
    ASSERT_EQ(c->status, RDMAD_OK) << "write " << i << ": " << c->status << "\n" << pair.a->output() << pair.b->output();
  }
  EXPECT_EQ(test::first_difference(src.data(), dst.data(), kBytes), -1);

  const auto code = abuser.wait_exit(30s);
  ASSERT_TRUE(code.has_value()) << abuser.output();
  EXPECT_EQ(*code, 0) << abuser.output();
  EXPECT_NE(abuser.output().find("refused, 0 accepted"), std::string::npos) << abuser.output();
  // One session the whole time: the bad requests never reached the peer as broken messages.
  EXPECT_EQ(pair.a->metric("rdmad_peer_sessions_total"), 1);
  EXPECT_EQ(pair.b->metric("rdmad_peer_frame_errors_total"), 0);
  EXPECT_EQ(pair.a->metric("rdmad_peers_connected"), 1);
  rdmad_flow_close(flow);
}

}  // namespace
}  // namespace rdmad::security
