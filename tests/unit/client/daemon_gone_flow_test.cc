// A flow whose daemon goes away: the daemon (played by the test) takes some requests into its own
// memory, completes one, and stops or dies. Every request the client posted must complete exactly
// once (the daemon's own completions first, then RDMAD_ERR_DAEMON_GONE from the library),
// rdmad_flow_wait without a timeout must return, and the flow must say it is disconnected. When a
// daemon answers again, the flow rebinds to it and keeps the application's handles.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <vector>

#include "client_impl.h"  // rdmad_mr, to name local memory without a registration round trip
#include "fake_daemon.h"
#include "rdmad/rdmad.h"

namespace rdmad::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Session {
  FakeDaemon daemon;
  FakeFlow ring{16, 32, 7, ring::FlowState::kConnected};
  int conn = -1;
  rdmad_client* client = nullptr;
  rdmad_flow* flow = nullptr;
  rdmad_mr mr;
  rdmad_remote remote{42, 1 << 20, RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ};

  explicit Session(ring::FlowState state = ring::FlowState::kConnected) {
    ring.header()->flow_state.store(static_cast<uint32_t>(state));
    mr.handle = 1;
    mr.length = 1 << 20;
    auto side = std::async(std::launch::async, [&] {
      conn = daemon.accept_client();
      return conn >= 0 && ring.answer_open(conn);
    });
    EXPECT_EQ(rdmad_connect(daemon.path().c_str(), &client), RDMAD_OK) << rdmad_last_error(nullptr);
    EXPECT_EQ(rdmad_flow_open(client, "node-b", nullptr, &flow), RDMAD_OK) << rdmad_last_error(client);
    EXPECT_TRUE(side.get());
  }
  ~Session() {
    daemon.die_leaving_socket_file();  // nobody would answer the flow's close
    rdmad_flow_close(flow);
    rdmad_disconnect(client);
  }
  // Five writes (wr_id 1..5) and two receives (100, 101).
  void post_seven() {
    for (uint64_t i = 1; i <= 5; ++i)
      ASSERT_EQ(rdmad_flow_write(flow, i, &mr, 0, &remote, 0, 4096), RDMAD_OK);
    ASSERT_EQ(rdmad_flow_recv(flow, 100, &mr, 0, 4096), RDMAD_OK);
    ASSERT_EQ(rdmad_flow_recv(flow, 101, &mr, 0, 4096), RDMAD_OK);
  }
  // The daemon takes the first three, completes wr 1, and is gone.
  void daemon_takes_three_completes_one_and_stops() {
    auto taken = ring.take(3);
    ASSERT_EQ(taken.size(), 3u);
    ring.complete(taken[0], RDMAD_OK);
    daemon.stop_listening();
    daemon.close_conn(conn);
  }
};

// Waits (no timeout) and polls until `want` completions arrived; every wait must return.
std::vector<rdmad_completion> drain(rdmad_flow* f, size_t want) {
  std::vector<rdmad_completion> got;
  for (int round = 0; got.size() < want && round < 100; ++round) {
    rdmad_status s = rdmad_flow_wait(f, -1);
    rdmad_completion c[8];
    size_t n = rdmad_flow_poll(f, c, 8);
    got.insert(got.end(), c, c + n);
    if (s != RDMAD_OK) break;
  }
  return got;
}

TEST(ClientFlowDaemonGone, EveryRequestCompletesOnceAndWaitReturns) {
  Session s;
  s.post_seven();
  s.daemon_takes_three_completes_one_and_stops();
  Watchdog w(5s, "rdmad_flow_wait(-1) on a flow whose daemon stopped");
  const auto t = Clock::now();
  auto got = drain(s.flow, 7);
  EXPECT_LT(Clock::now() - t, 1s);
  ASSERT_EQ(got.size(), 7u);
  EXPECT_EQ(got[0].wr_id, 1u);  // the daemon's own completion comes first
  EXPECT_EQ(got[0].status, RDMAD_OK);
  const uint64_t order[] = {1, 2, 3, 4, 5, 100, 101};
  for (size_t i = 1; i < 7; ++i) {
    EXPECT_EQ(got[i].wr_id, order[i]) << i;
    EXPECT_EQ(got[i].status, RDMAD_ERR_DAEMON_GONE) << i;
    EXPECT_EQ(got[i].length, 0u);
    EXPECT_EQ(got[i].op, order[i] >= 100 ? RDMAD_OP_RECV : RDMAD_OP_WRITE);
  }
  // Nothing left: wait says why; with no daemon to rebind to (reconnecting off), posting is refused.
  EXPECT_EQ(rdmad_flow_wait(s.flow, -1), RDMAD_ERR_DAEMON_GONE);
  EXPECT_NE(std::string(rdmad_last_error(s.client)).find("stopped or died"), std::string::npos);
  rdmad_set_reconnect_timeout_ms(s.client, 0);
  EXPECT_EQ(rdmad_flow_write(s.flow, 9, &s.mr, 0, &s.remote, 0, 4096), RDMAD_ERR_DAEMON_GONE);
  EXPECT_EQ(rdmad_flow_get_state(s.flow), RDMAD_FLOW_DISCONNECTED);
  rdmad_completion c;
  EXPECT_EQ(rdmad_flow_poll(s.flow, &c, 1), 0u);
  rdmad_token token{};
  rdmad_remote r;
  EXPECT_EQ(rdmad_flow_import(s.flow, &token, &r), RDMAD_ERR_DAEMON_GONE);
}

// A dying engine may still write a completion after the connection closed; the library already
// failed that request, so the late one must not be delivered a second time.
TEST(ClientFlowDaemonGone, LateCompletionAfterTheHangupIsNotDeliveredTwice) {
  Session s;
  s.post_seven();
  auto taken = s.ring.take(3);
  s.daemon.stop_listening();
  s.daemon.close_conn(s.conn);
  EXPECT_EQ(rdmad_flow_wait(s.flow, 1000), RDMAD_OK);  // the library's completions are ready
  s.ring.complete(taken[1], RDMAD_OK);                 // too late
  auto got = drain(s.flow, 7);
  ASSERT_EQ(got.size(), 7u);
  std::map<uint64_t, int> seen;
  for (const auto& c : got) {
    ++seen[c.wr_id];
    EXPECT_EQ(c.status, RDMAD_ERR_DAEMON_GONE);
  }
  for (uint64_t id : {1, 2, 3, 4, 5, 100, 101}) EXPECT_EQ(seen[id], 1) << id;
}

// An application that only polls (no wait) learns it too, within the bound.
TEST(ClientFlowDaemonGone, BusyPollerGetsTheErrors) {
  Session s;
  s.post_seven();
  s.daemon.die_leaving_socket_file();  // SIGKILL: nothing taken, nothing completed
  const auto end = Clock::now() + 1s;
  std::vector<rdmad_completion> got;
  rdmad_completion c[8];
  while (got.size() < 7 && Clock::now() < end) {
    size_t n = rdmad_flow_poll(s.flow, c, 8);
    got.insert(got.end(), c, c + n);
  }
  ASSERT_EQ(got.size(), 7u);
  for (const auto& e : got) EXPECT_EQ(e.status, RDMAD_ERR_DAEMON_GONE);
}

// Event loops: rdmad_flow_arm says "poll now" once the daemon is gone with requests outstanding.
TEST(ClientFlowDaemonGone, ArmReportsTheDeadDaemon) {
  Session s;
  ASSERT_EQ(rdmad_flow_send(s.flow, 5, &s.mr, 0, 64), RDMAD_OK);
  EXPECT_EQ(rdmad_flow_arm(s.flow), 0);  // alive, nothing completed: sleep
  s.daemon.die_leaving_socket_file();
  EXPECT_EQ(rdmad_flow_arm(s.flow), 1);
  rdmad_completion c;
  ASSERT_EQ(rdmad_flow_poll(s.flow, &c, 1), 1u);
  EXPECT_EQ(c.wr_id, 5u);
  EXPECT_EQ(c.status, RDMAD_ERR_DAEMON_GONE);
  EXPECT_EQ(c.op, RDMAD_OP_SEND);
  EXPECT_EQ(rdmad_flow_arm(s.flow), 0);  // nothing left: an event loop may sleep, it will not spin
}

TEST(ClientFlowDaemonGone, WaitConnectedReturnsWhenTheDaemonDies) {
  Session s(ring::FlowState::kConnecting);
  rdmad_set_reconnect_timeout_ms(s.client, 0);  // no daemon to come back: nothing to wait for
  s.daemon.die_leaving_socket_file();
  Watchdog w(5s, "rdmad_flow_wait_connected(-1) on a flow whose daemon died");
  const auto t = Clock::now();
  EXPECT_EQ(rdmad_flow_wait_connected(s.flow, -1), RDMAD_ERR_DAEMON_GONE);
  EXPECT_LT(Clock::now() - t, 1s);
}

// A live daemon's flow keeps working, and waits end on its completions as before.
TEST(ClientFlowDaemonGone, LiveDaemonCompletionsAreUnchanged) {
  Session s;
  s.post_seven();
  auto taken = s.ring.take(7);
  ASSERT_EQ(taken.size(), 7u);
  s.ring.complete(taken[5], RDMAD_OK);  // a receive first (they complete out of order)
  for (size_t i = 0; i < 5; ++i) s.ring.complete(taken[i], RDMAD_OK);
  auto got = drain(s.flow, 6);
  ASSERT_EQ(got.size(), 6u);
  for (const auto& c : got) EXPECT_EQ(c.status, RDMAD_OK);
  EXPECT_EQ(rdmad_flow_wait(s.flow, 50), RDMAD_ERR_NO_RESOURCE);  // 101 still outstanding
  EXPECT_EQ(rdmad_flow_get_state(s.flow), RDMAD_FLOW_CONNECTED);
}

// Answers one import on `c` with remote handle `handle`; the token it asked for in *token.
bool answer_import(int c, uint64_t handle, rdmad_token* token) {
  Frame f;
  if (!FakeDaemon::read_frame(c, &f) || f.header.type != static_cast<uint16_t>(proto::MsgType::kImport) ||
      f.body.size() != sizeof(proto::ImportRequest))
    return false;
  proto::ImportRequest req;
  std::memcpy(&req, f.body.data(), sizeof(req));
  std::memcpy(token->bytes, req.token, sizeof(token->bytes));
  proto::ImportReply r{handle, 1 << 20, RDMAD_ACCESS_REMOTE_WRITE, 0};
  return FakeDaemon::reply(c, f, &r, sizeof(r));
}

rdmad_token token_of(uint8_t b) {
  rdmad_token t;
  std::memset(t.bytes, b, sizeof(t.bytes));
  return t;
}

// The daemon restarts under a flow with requests in flight: the old ones complete with
// RDMAD_ERR_DAEMON_GONE, and the next post rebinds the flow to the new daemon — opened again,
// its token imported again — with the application's rdmad_remote (the old daemon's handle 42)
// mapped to the new daemon's handle, and the completion fd's number kept.
TEST(ClientFlowRebind, PostAfterTheDaemonRestartedRebindsAndKeepsTheHandles) {
  Session s;
  const rdmad_token a = token_of(0xa1);
  rdmad_remote ra{};
  auto imported = std::async(std::launch::async, [&] {
    rdmad_token seen{};
    return answer_import(s.conn, 42, &seen) && std::memcmp(seen.bytes, a.bytes, sizeof(a.bytes)) == 0;
  });
  ASSERT_EQ(rdmad_flow_import(s.flow, &a, &ra), RDMAD_OK) << rdmad_last_error(s.client);
  ASSERT_TRUE(imported.get());
  EXPECT_EQ(ra.handle, 42u);
  ASSERT_EQ(rdmad_flow_write(s.flow, 1, &s.mr, 0, &ra, 0, 4096), RDMAD_OK);
  ASSERT_EQ(rdmad_flow_write(s.flow, 2, &s.mr, 0, &ra, 0, 4096), RDMAD_OK);
  const int fd = rdmad_flow_fd(s.flow);

  // The restart: the old daemon dies with both writes; a new one listens on the same path.
  ASSERT_TRUE(s.daemon.relisten());
  const auto deadline = Clock::now() + 2s;
  std::vector<rdmad_completion> failed;
  while (failed.size() < 2 && Clock::now() < deadline) {
    rdmad_completion c[4];
    failed.insert(failed.end(), c, c + rdmad_flow_poll(s.flow, c, 4));
  }
  ASSERT_EQ(failed.size(), 2u);
  for (const auto& c : failed) EXPECT_EQ(c.status, RDMAD_ERR_DAEMON_GONE);
  EXPECT_EQ(rdmad_flow_get_state(s.flow), RDMAD_FLOW_DISCONNECTED);

  FakeFlow ring2{16, 32, 8, ring::FlowState::kConnected};
  int conn2 = -1;
  auto restarted = std::async(std::launch::async, [&] {
    conn2 = s.daemon.accept_client(0x5678);
    rdmad_token seen{};
    return conn2 >= 0 && ring2.answer_open(conn2) && answer_import(conn2, 1, &seen) &&
           std::memcmp(seen.bytes, a.bytes, sizeof(a.bytes)) == 0;
  });
  Watchdog w(10s, "a post that rebinds its flow");
  ASSERT_EQ(rdmad_flow_write(s.flow, 3, &s.mr, 0, &ra, 0, 4096), RDMAD_OK) << rdmad_last_error(s.client);
  ASSERT_TRUE(restarted.get()) << "the rebind did not open the flow and import its token again";
  EXPECT_EQ(rdmad_flow_get_state(s.flow), RDMAD_FLOW_CONNECTED);
  EXPECT_EQ(rdmad_flow_fd(s.flow), fd);
  auto taken = ring2.take(4);
  ASSERT_EQ(taken.size(), 1u) << "the post did not go to the new daemon's ring";
  EXPECT_EQ(taken[0].wr_id, 3u);
  EXPECT_EQ(taken[0].remote_handle, 1u) << "the application's handle was not mapped to the new daemon's";
  ring2.complete(taken[0], RDMAD_OK);
  rdmad_completion c;
  ASSERT_EQ(rdmad_flow_wait(s.flow, 2000), RDMAD_OK);
  ASSERT_EQ(rdmad_flow_poll(s.flow, &c, 1), 1u);
  EXPECT_EQ(c.wr_id, 3u);
  EXPECT_EQ(c.status, RDMAD_OK);

  // A token imported now gets the new daemon's handle 42, which the application already holds for
  // the first token: it is given another one, and each handle reaches the daemon as its own.
  const rdmad_token b = token_of(0xb2);
  rdmad_remote rb{};
  auto second = std::async(std::launch::async, [&] {
    rdmad_token seen{};
    return answer_import(conn2, 42, &seen);
  });
  ASSERT_EQ(rdmad_flow_import(s.flow, &b, &rb), RDMAD_OK);
  ASSERT_TRUE(second.get());
  EXPECT_NE(rb.handle, ra.handle);
  ASSERT_EQ(rdmad_flow_write(s.flow, 4, &s.mr, 0, &rb, 0, 4096), RDMAD_OK);
  ASSERT_EQ(rdmad_flow_write(s.flow, 5, &s.mr, 0, &ra, 0, 4096), RDMAD_OK);
  taken = ring2.take(4);
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].remote_handle, 42u);
  EXPECT_EQ(taken[1].remote_handle, 1u);
}

// Importing the same token twice gives the application the same handle; should the daemon answer
// with another one, requests on the application's handle go to the new one.
TEST(ClientFlowRebind, ImportingATokenAgainKeepsItsHandle) {
  Session s;
  const rdmad_token a = token_of(0xc3);
  for (uint64_t daemon_handle : {9u, 10u}) {
    rdmad_remote r{};
    auto imported = std::async(std::launch::async, [&] {
      rdmad_token seen{};
      return answer_import(s.conn, daemon_handle, &seen);
    });
    ASSERT_EQ(rdmad_flow_import(s.flow, &a, &r), RDMAD_OK);
    ASSERT_TRUE(imported.get());
    EXPECT_EQ(r.handle, 9u) << daemon_handle;
    ASSERT_EQ(rdmad_flow_write(s.flow, daemon_handle, &s.mr, 0, &r, 0, 4096), RDMAD_OK);
    auto taken = s.ring.take(1);
    ASSERT_EQ(taken.size(), 1u);
    EXPECT_EQ(taken[0].remote_handle, daemon_handle);
  }
}

}  // namespace
}  // namespace rdmad::test
