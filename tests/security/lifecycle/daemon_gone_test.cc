// Clients of a daemon that stops (SIGTERM) or dies (SIGKILL) in the middle of a transfer between
// two daemons with peer keys: every request of its flow completes within 1 s, with the daemon's
// result or RDMAD_ERR_DAEMON_GONE, and rdmad_flow_wait without a timeout returns (the old library
// got 0 of 64 completions and waited forever: the daemon's flow stayed CONNECTED in the ring).
// Connecting to a dead daemon's leftover socket, or to one that never answers, fails within the
// stated bound.
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <map>
#include <vector>

#include "integration/flow/flow_cluster.h"
#include "lifecycle_util.h"
#include "unit/client/watchdog.h"

namespace rdmad::test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kRequests = 64;
constexpr size_t kChunk = 1 << 20;

class DaemonGone : public ::testing::TestWithParam<int> {};

TEST_P(DaemonGone, EveryFlowRequestCompletesWithinOneSecond) {
  const int sig = GetParam();
  TempDir keys;
  const std::string key = write_key_file(keys);
  NodeSpec sa = two_nic_node("node-a", 11);
  NodeSpec sb = two_nic_node("node-b", 21);
  sa.key_file = sb.key_file = key;
  Pair pair(sa, sb);
  ASSERT_TRUE(pair.start());
  rdmad_client* ca = pair.a->client();
  rdmad_flow* fa = nullptr;
  ASSERT_EQ(rdmad_flow_open(ca, "node-b", nullptr, &fa), RDMAD_OK) << rdmad_last_error(ca);
  ASSERT_EQ(rdmad_flow_wait_connected(fa, 10000), RDMAD_OK) << pair.a->output();
  Buffer src(ca, kChunk, kAllAccess);
  Buffer dst(pair.b->client(), kChunk, kAllAccess);
  rdmad_token token{};
  ASSERT_EQ(rdmad_export(pair.b->client(), dst.mr, 0, kChunk, "node-a", RDMAD_ACCESS_REMOTE_WRITE, &token), RDMAD_OK)
      << rdmad_last_error(pair.b->client());
  rdmad_remote remote{};
  ASSERT_EQ(rdmad_flow_import(fa, &token, &remote), RDMAD_OK) << rdmad_last_error(ca);

  // 16 WRITEs, a SEND node-b never posts a receive for (it waits, and completions come in
  // submission order, so everything after it waits too), 47 more WRITEs: the transfer is
  // certainly in the middle when the signal comes.
  for (uint64_t i = 0; i < kRequests; ++i) {
    const rdmad_status s = i == 16 ? rdmad_flow_send(fa, i, src.mr, 0, 4096)
                                   : rdmad_flow_write(fa, i, src.mr, 0, &remote, 0, kChunk);
    ASSERT_EQ(s, RDMAD_OK) << i;
  }
  std::map<uint64_t, rdmad_completion> got;
  auto take = [&] {
    rdmad_completion c[16];
    const size_t n = rdmad_flow_poll(fa, c, 16);
    for (size_t i = 0; i < n; ++i) EXPECT_TRUE(got.emplace(c[i].wr_id, c[i]).second) << "twice: " << c[i].wr_id;
  };
  const auto started = Clock::now();
  while (got.empty() && Clock::now() - started < 20s) {
    rdmad_flow_wait(fa, 100);
    take();
  }
  ASSERT_FALSE(got.empty()) << "no WRITE completed before the signal:\n" << pair.a->output();
  ASSERT_LT(got.size(), 17u);
  const size_t before = got.size();

  const auto t0 = Clock::now();
  pair.a->process()->signal(sig);
  {
    Watchdog w(5s, "rdmad_flow_wait(-1) after the daemon got signal " + std::to_string(sig), [&] {
      pair.a->process()->signal(SIGKILL);
      pair.b->process()->signal(SIGKILL);
    });
    rdmad_status last = RDMAD_OK;
    while (got.size() < kRequests && last == RDMAD_OK) {
      last = rdmad_flow_wait(fa, -1);  // no timeout: it must return by itself
      take();
    }
    EXPECT_LT(Clock::now() - t0, 1s) << "took " << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count() << " ms";
  }
  ASSERT_EQ(got.size(), kRequests) << "requests lost; flow_wait said " << rdmad_strerror(rdmad_flow_wait(fa, 0));
  size_t gone = 0;
  for (const auto& [id, c] : got) {
    EXPECT_TRUE(c.status == RDMAD_OK || c.status == RDMAD_ERR_DAEMON_GONE) << id << ": " << rdmad_strerror(c.status);
    if (c.status == RDMAD_ERR_DAEMON_GONE) ++gone;
  }
  EXPECT_EQ(got.at(16).status, RDMAD_ERR_DAEMON_GONE);  // the SEND never had a receive
  EXPECT_GE(gone, kRequests - 16 - before + 1);
  // Nothing left, and the flow says it is disconnected.
  EXPECT_EQ(rdmad_flow_wait(fa, -1), RDMAD_ERR_DAEMON_GONE);
  EXPECT_EQ(rdmad_flow_get_state(fa), RDMAD_FLOW_DISCONNECTED);

  // The daemon itself: SIGTERM is a clean stop, SIGKILL the kernel's.
  EXPECT_EQ(pair.a->process()->wait_exit(10s), sig == SIGTERM ? 0 : 128 + SIGKILL) << pair.a->output();
  // A new request tries to rebind the flow and, with no daemon, is refused within the reconnect
  // timeout instead of blocking.
  rdmad_set_reconnect_timeout_ms(ca, 300);
  const auto t2 = Clock::now();
  EXPECT_EQ(rdmad_flow_write(fa, 99, src.mr, 0, &remote, 0, 4096), RDMAD_ERR_DAEMON_GONE);
  EXPECT_LT(Clock::now() - t2, 2s);
  // A new call on the client fails within its reconnect timeout instead of blocking.
  const auto t1 = Clock::now();
  size_t count = 0;
  EXPECT_EQ(rdmad_query_nics(ca, nullptr, 0, &count), RDMAD_ERR_CONNECTION);
  EXPECT_LT(Clock::now() - t1, 1s);
  rdmad_flow_close(fa);
}

INSTANTIATE_TEST_SUITE_P(Lifecycle, DaemonGone, ::testing::Values(SIGTERM, SIGKILL),
                         [](const auto& p) { return p.param == SIGTERM ? "sigterm" : "sigkill"; });

// SIGKILL leaves the socket file behind; nobody accepts on it any more.
TEST(ConnectToStoppedDaemon, LeftoverSocketFailsAtOnce) {
  TempDir dir;
  Daemon d(dir.write("rdmad.toml", daemon_config(dir)));
  ASSERT_GT(d.metrics_port(), 0);
  const std::string sock = dir.path() + "/run/rdmad.sock";
  d.process().signal(SIGKILL);
  ASSERT_EQ(d.process().wait_exit(5s), 128 + SIGKILL);
  struct stat st {};
  ASSERT_EQ(::stat(sock.c_str(), &st), 0);
  ASSERT_TRUE(S_ISSOCK(st.st_mode));
  Watchdog w(5s, "rdmad_connect to a dead daemon's socket");
  const auto t = Clock::now();
  rdmad_client* c = nullptr;
  EXPECT_EQ(rdmad_connect(sock.c_str(), &c), RDMAD_ERR_CONNECTION);
  EXPECT_LT(Clock::now() - t, 500ms);
}

// A daemon that is there but never answers (stopped with SIGSTOP: its socket still takes
// connections into the backlog, as a socket systemd holds does): the old library waited for the
// hello reply forever; now rdmad_connect gives up at RDMAD_DEFAULT_CONNECT_TIMEOUT_MS.
TEST(ConnectToStoppedDaemon, ListenerThatNeverAnswersTimesOut) {
  TempDir dir;
  Daemon d(dir.write("rdmad.toml", daemon_config(dir)));
  ASSERT_GT(d.metrics_port(), 0);
  const std::string sock = dir.path() + "/run/rdmad.sock";
  d.process().signal(SIGSTOP);
  {
    Watchdog w(10s, "rdmad_connect to a daemon that never answers", [&] { d.process().signal(SIGKILL); });
    const auto t = Clock::now();
    rdmad_client* c = nullptr;
    EXPECT_EQ(rdmad_connect(sock.c_str(), &c), RDMAD_ERR_CONNECTION);
    const auto took = Clock::now() - t;
    EXPECT_GE(took, std::chrono::milliseconds(RDMAD_DEFAULT_CONNECT_TIMEOUT_MS - 100));
    EXPECT_LT(took, std::chrono::milliseconds(RDMAD_DEFAULT_CONNECT_TIMEOUT_MS + 1000));
    EXPECT_NE(std::string(rdmad_last_error(nullptr)).find("hello"), std::string::npos) << rdmad_last_error(nullptr);
  }
  d.process().signal(SIGCONT);
  d.process().signal(SIGTERM);
  EXPECT_EQ(d.process().wait_exit(5s), 0) << d.process().output();
}

}  // namespace
}  // namespace rdmad::test
