// Two-sided transfers pair only within one uid. User 65534 opens flows on root's channel between
// the same two nodes and posts first: a send on node-a before root's receive on node-b, a receive
// on node-b before root's send on node-a. Root's send must land in root's receive, and user
// 65534's send in its own receive. Before, the channel alone paired them: root's receive got user
// 65534's bytes and user 65534's receive got root's.
#include <gtest/gtest.h>

#include <cstring>

#include "integration/flow/flow_cluster.h"
#include "security/local_users.h"

namespace rdmad::security {
namespace {

using namespace std::chrono_literals;
using test::Buffer;

constexpr uint64_t kChannel = 7;

// Waits until node's rdmad_transfers_in_flight is at least n (its engine took the requests).
bool in_flight_reaches(const test::Node& node, double n) {
  const auto end = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < end) {
    if (node.metric("rdmad_transfers_in_flight").value_or(0) >= n) return true;
  }
  return false;
}

test::Subprocess intruder(const test::Node& node, const std::string& peer, const char* op) {
  return test::Subprocess({test::binary("tests/security/access/security_channel_intruder"), node.socket_path(), peer,
                           std::to_string(kNobody), std::to_string(kChannel), op, "60"});
}

TEST(ChannelScope, AnotherUsersSendAndReceiveNeverPairWithRoots) {
  test::Pair pair(open_node("node-a", 41), open_node("node-b", 43));
  ASSERT_TRUE(pair.start());
  open_to_others(pair.a->socket_path());
  open_to_others(pair.b->socket_path());
  Buffer src(pair.a->client(), 4096, test::kAllAccess);
  Buffer dst(pair.b->client(), 4096, test::kAllAccess);
  std::memset(src.data(), 'R', 4096);
  std::memset(dst.data(), 0, 4096);
  const rdmad_flow_attr attr{kChannel, 0, 0};
  rdmad_flow* fa = nullptr;
  rdmad_flow* fb = nullptr;
  ASSERT_EQ(rdmad_flow_open(pair.a->client(), "node-b", &attr, &fa), RDMAD_OK);
  ASSERT_EQ(rdmad_flow_open(pair.b->client(), "node-a", &attr, &fb), RDMAD_OK);
  ASSERT_EQ(rdmad_flow_wait_connected(fa, 10000), RDMAD_OK);
  ASSERT_EQ(rdmad_flow_wait_connected(fb, 10000), RDMAD_OK);

  // 1. User 65534's send waits on node-a for a receive.
  test::Subprocess sender = intruder(*pair.a, "node-b", "send");
  ASSERT_TRUE(sender.wait_for_output("posted", 20s)) << sender.output();
  ASSERT_TRUE(in_flight_reaches(*pair.a, 1)) << pair.a->output();
  // 2. Root's receive on node-b: its credit reaches node-a, where that send is waiting.
  ASSERT_EQ(rdmad_flow_recv(fb, 10, dst.mr, 0, 4096), RDMAD_OK);
  ASSERT_TRUE(in_flight_reaches(*pair.b, 1)) << "root's receive completed at once: " << pair.b->output();
  // 3. User 65534's receive on node-b.
  test::Subprocess receiver = intruder(*pair.b, "node-a", "recv");
  ASSERT_TRUE(receiver.wait_for_output("posted", 20s)) << receiver.output();
  // 4. Root's send on node-a.
  ASSERT_EQ(rdmad_flow_send(fa, 20, src.mr, 0, 64), RDMAD_OK);

  const auto got = test::wait_completion(fb, 30s);
  ASSERT_TRUE(got.has_value()) << pair.a->output() << pair.b->output();
  EXPECT_EQ(got->status, RDMAD_OK);
  EXPECT_EQ(got->length, 64u);
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(dst.data()[i], 'R') << "root's receive got another user's byte at " << i;
  EXPECT_EQ(dst.data()[64], 0);
  const auto sent = test::wait_completion(fa, 30s);
  ASSERT_TRUE(sent.has_value());
  EXPECT_EQ(sent->status, RDMAD_OK);
  // User 65534's two requests paired with each other: its receive holds its own 64 bytes of 'X'.
  ASSERT_TRUE(receiver.wait_for_output("completed", 30s)) << receiver.output();
  EXPECT_NE(receiver.output().find("completed status=0 length=64 first=58"), std::string::npos) << receiver.output();
  ASSERT_TRUE(sender.wait_for_output("completed", 30s)) << sender.output();
  EXPECT_NE(sender.output().find("completed status=0"), std::string::npos) << sender.output();
  rdmad_flow_close(fa);
  rdmad_flow_close(fb);
}

}  // namespace
}  // namespace rdmad::security
