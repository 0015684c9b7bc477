// Restarts that keep registrations and flows (docs/operations.md, "Restarts that keep
// registrations"): two real daemons on loopback, one of them under rdmad-supervise, which keeps
// the descriptors it hands over and passes them back at the next start as systemd does (the
// systemd guest test, tests/vm, does the same under systemd). The application's client and flow
// stay as they are across the restart, as a training job's would.
#include <signal.h>

#include <chrono>
#include <cstring>
#include <set>
#include <vector>

#include "flow_cluster.h"

namespace rdmad::test {
namespace {

constexpr size_t kBytes = 8 << 20;
constexpr size_t kChunk = 256 << 10;
constexpr size_t kChunks = kBytes / kChunk;

// Posts WRITEs of chunks [first, last) of src to the same offsets of the remote; true when posted.
bool post_chunks(rdmad_flow* flow, const Buffer& src, const rdmad_remote& remote, size_t first, size_t last) {
  for (size_t c = first; c < last; ++c) {
    const auto end = std::chrono::steady_clock::now() + 10s;
    rdmad_status s;
    while ((s = rdmad_flow_write(flow, c, src.mr, c * kChunk, &remote, c * kChunk, kChunk)) == RDMAD_ERR_NO_RESOURCE &&
           std::chrono::steady_clock::now() < end)
      rdmad_flow_wait(flow, 10);
    if (s != RDMAD_OK) {
      ADD_FAILURE() << "write of chunk " << c << ": " << rdmad_strerror(s);
      return false;
    }
  }
  return true;
}

// Takes `n` completions; returns the chunks that completed OK (the others failed, as they may when
// the daemon went away with them).
std::set<size_t> complete(rdmad_flow* flow, size_t n, std::set<rdmad_status>* failures = nullptr) {
  std::set<size_t> ok;
  for (size_t i = 0; i < n; ++i) {
    auto c = wait_completion(flow, 20s);
    if (!c) {
      ADD_FAILURE() << "no completion " << i << " of " << n;
      break;
    }
    if (c->status == RDMAD_OK)
      ok.insert(c->wr_id);
    else if (failures != nullptr)
      failures->insert(c->status);
  }
  return ok;
}

// What an application does across a restart: posts the chunks not done yet, and again those
// that failed with an error a restart gives (RDMAD_ERR_DAEMON_GONE while its daemon went away,
// RDMAD_ERR_PEER while the peer is back but has not granted its exports again), on the same flow
// and the same rdmad_remote, until every chunk is done. Any other error fails the test.
std::set<size_t> finish(rdmad_flow* flow, const Buffer& src, const rdmad_remote& remote, std::set<size_t> done,
                        std::set<rdmad_status>* retried, std::chrono::steady_clock::time_point* first_ok = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (done.size() < kChunks && std::chrono::steady_clock::now() < deadline) {
    std::vector<size_t> left;
    for (size_t c = 0; c < kChunks; ++c)
      if (done.count(c) == 0) left.push_back(c);
    size_t posted = 0;
    for (size_t c : left) {
      const rdmad_status s = rdmad_flow_write(flow, c, src.mr, c * kChunk, &remote, c * kChunk, kChunk);
      if (s == RDMAD_ERR_NO_RESOURCE) break;  // the ring is full: take completions first
      if (s == RDMAD_ERR_DAEMON_GONE || s == RDMAD_ERR_PEER) {
        retried->insert(s);  // the rebind found no daemon yet, or the peer not yet connected
        break;
      }
      if (s != RDMAD_OK) {
        ADD_FAILURE() << "write of chunk " << c << ": " << rdmad_strerror(s);
        return done;
      }
      ++posted;
    }
    for (size_t i = 0; i < posted; ++i) {
      auto c = wait_completion(flow, 20s);
      if (!c) {
        ADD_FAILURE() << "no completion " << i << " of " << posted;
        return done;
      }
      if (c->status == RDMAD_OK) {
        if (first_ok != nullptr && *first_ok == std::chrono::steady_clock::time_point{})
          *first_ok = std::chrono::steady_clock::now();
        done.insert(c->wr_id);
      } else if (c->status == RDMAD_ERR_DAEMON_GONE || c->status == RDMAD_ERR_PEER) {
        retried->insert(c->status);
      } else {
        ADD_FAILURE() << "chunk " << c->wr_id << ": " << rdmad_strerror(c->status);
        return done;
      }
    }
  }
  return done;
}

// The pid of the daemon the supervisor started last (-1: none started).
pid_t last_started_pid(const std::string& out) {
  pid_t pid = -1;
  std::regex re(R"(rdmad-supervise: started pid=(\d+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
    pid = static_cast<pid_t>(std::stoi((*it)[1]));
  return pid;
}

// How many descriptors the supervisor passed to the daemon it started last (-1: none started).
int last_started_with(const std::string& out) {
  int fds = -1;
  std::regex re(R"(rdmad-supervise: started pid=\d+ stored_fds=(\d+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
    fds = std::stoi((*it)[1]);
  return fds;
}

struct Transfer {
  std::unique_ptr<Pair> pair;
  std::unique_ptr<Buffer> src, dst;
  rdmad_flow* flow = nullptr;
  rdmad_token token{};
  rdmad_remote remote{};

  // restarting: "a" (the writer's daemon) or "b" (the exporter's) runs under the supervisor.
  explicit Transfer(const std::string& restarting, const std::string& extra = "") {
    NodeSpec a = two_nic_node("a", 10, restarting == "a" ? extra : "");
    NodeSpec b = two_nic_node("b", 20, restarting == "b" ? extra : "");
    (restarting == "a" ? a : b).supervised = true;
    pair = std::make_unique<Pair>(std::move(a), std::move(b));
  }
  ~Transfer() {
    if (flow != nullptr) rdmad_flow_close(flow);
  }
  Node& a() { return *pair->a; }
  Node& b() { return *pair->b; }

  void open() {
    ASSERT_TRUE(pair->start());
    src = std::make_unique<Buffer>(a().client(), kBytes, kAllAccess);
    dst = std::make_unique<Buffer>(b().client(), kBytes, kAllAccess);
    fill(src->data(), kBytes, 21);
    std::memset(dst->data(), 0, kBytes);
    open_flow();
    ASSERT_EQ(rdmad_export(b().client(), dst->mr, 0, kBytes, "a", RDMAD_ACCESS_REMOTE_WRITE, &token), RDMAD_OK)
        << rdmad_last_error(b().client());
    ASSERT_EQ(rdmad_flow_import(flow, &token, &remote), RDMAD_OK) << rdmad_last_error(a().client());
  }
  void open_flow() {
    ASSERT_EQ(rdmad_flow_open(a().client(), "b", nullptr, &flow), RDMAD_OK) << rdmad_last_error(a().client());
    ASSERT_EQ(rdmad_flow_wait_connected(flow, 15000), RDMAD_OK) << a().output() << b().output();
  }
  void check_bytes() {
    EXPECT_EQ(first_difference(src->data(), dst->data(), kBytes), -1) << "the destination differs from the source";
  }
};

// The writer's daemon restarts mid-transfer: the client keeps its registration (same rdmad_mr,
// same handle, not lost) and its flow: the requests in flight fail with an error it retries, and
// retried on the same rdmad_flow and rdmad_remote (the library rebinds the flow to the new daemon
// and imports the token again) the transfer finishes byte-exact.
TEST(Restart, WritersDaemonRestartsMidTransferAndTheTransferFinishesByteExact) {
  Transfer t("a");
  ASSERT_NO_FATAL_FAILURE(t.open());
  const uint64_t handle = rdmad_mr_handle(t.src->mr);
  ASSERT_TRUE(post_chunks(t.flow, *t.src, t.remote, 0, kChunks / 2));
  std::set<size_t> done = complete(t.flow, kChunks / 2);
  ASSERT_EQ(done.size(), kChunks / 2);

  // A quarter more in flight, then the restart.
  ASSERT_TRUE(post_chunks(t.flow, *t.src, t.remote, kChunks / 2, 3 * kChunks / 4));
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(t.a().restart());
  std::set<rdmad_status> failures;
  for (size_t c : complete(t.flow, kChunks / 4, &failures)) done.insert(c);
  for (rdmad_status s : failures) EXPECT_EQ(s, RDMAD_ERR_DAEMON_GONE);

  std::chrono::steady_clock::time_point first_ok{};
  done = finish(t.flow, *t.src, t.remote, done, &failures, &first_ok);
  ASSERT_EQ(done.size(), kChunks) << t.a().output() << t.b().output();
  t.check_bytes();
  const double serving_ms = std::chrono::duration<double, std::milli>(first_ok - t0).count();
  EXPECT_EQ(rdmad_flow_get_state(t.flow), RDMAD_FLOW_CONNECTED);
  RecordProperty("restart_to_first_write_ms", std::to_string(serving_ms));
  std::printf("restart to the flow's first write on the new daemon: %.0f ms\n", serving_ms);

  rdmad_registration_info regs[4];
  size_t count = 0;
  ASSERT_EQ(rdmad_list_registrations(t.a().client(), regs, 4, &count), RDMAD_OK) << rdmad_last_error(t.a().client());
  ASSERT_EQ(count, 1u) << t.a().output();
  EXPECT_EQ(regs[0].handle, handle);
  EXPECT_EQ(rdmad_mr_is_lost(t.src->mr), 0);
  EXPECT_EQ(rdmad_mr_handle(t.src->mr), handle);
  EXPECT_EQ(rdmad_mr_nic_count(t.src->mr), 2u);
  EXPECT_TRUE(t.a().process()->wait_for_output("session resumed", 5s)) << t.a().output();
  EXPECT_EQ(last_started_with(t.a().output()), 1) << "the registration's memfd was not kept\n" << t.a().output();
}

// The exporter's daemon restarts: its client keeps the registration, the export keeps its token,
// and the writer's flow and import stay as they are: the writer's daemon gives the import its keys
// again when the restarted exporter grants the token again, and the writes the writer retries on
// the same rdmad_remote finish byte-exact in the memory it exported.
TEST(Restart, ExportersDaemonRestartsAndItsTokenStaysValid) {
  Transfer t("b");
  ASSERT_NO_FATAL_FAILURE(t.open());
  const uint64_t handle = rdmad_mr_handle(t.dst->mr);
  ASSERT_TRUE(post_chunks(t.flow, *t.src, t.remote, 0, kChunks / 2));
  std::set<size_t> done = complete(t.flow, kChunks / 2);
  ASSERT_EQ(done.size(), kChunks / 2);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(t.b().restart());

  std::set<rdmad_status> retried;
  std::chrono::steady_clock::time_point first_ok{};
  done = finish(t.flow, *t.src, t.remote, done, &retried, &first_ok);
  ASSERT_EQ(done.size(), kChunks) << t.a().output() << t.b().output();
  t.check_bytes();
  for (rdmad_status s : retried) EXPECT_EQ(s, RDMAD_ERR_PEER) << "the writer's own daemon did not restart";
  std::printf("exporter's restart to the writer's first write: %.0f ms\n",
              std::chrono::duration<double, std::milli>(first_ok - t0).count());

  rdmad_registration_info regs[4];
  size_t count = 0;
  ASSERT_EQ(rdmad_list_registrations(t.b().client(), regs, 4, &count), RDMAD_OK) << rdmad_last_error(t.b().client());
  ASSERT_EQ(count, 1u) << t.b().output();
  EXPECT_EQ(regs[0].handle, handle);
  EXPECT_EQ(rdmad_mr_is_lost(t.dst->mr), 0);
  EXPECT_TRUE(t.b().process()->wait_for_output("sessions restored sessions=1 handles=1 of=1 exports=1 of=1", 1s))
      << t.b().output();
}

// The exporter's daemon crashes and comes back without its session (nothing kept: resume off):
// no revoke ever reaches the writer's daemon, so the writer's import waits for a grant that never
// comes. Its requests fail RDMAD_ERR_PEER meanwhile, and RDMAD_ERR_NOT_FOUND once the peer has
// been back for the grace (5 s), instead of retrying forever.
TEST(Restart, ImportWhoseExportDidNotSurviveFailsNotFoundAfterTheGrace) {
  Transfer t("b", "[ipc]\nresume_grace_ms = 0\n");
  ASSERT_NO_FATAL_FAILURE(t.open());
  ASSERT_TRUE(post_chunks(t.flow, *t.src, t.remote, 0, 1));
  ASSERT_EQ(complete(t.flow, 1).size(), 1u);
  const pid_t pid = last_started_pid(t.b().output());
  ASSERT_GT(pid, 0) << t.b().output();
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);  // the supervisor starts it again, 2 s later
  std::set<rdmad_status> seen;
  rdmad_status last = RDMAD_OK;
  const bool not_found = eventually(
      [&] {
        if (rdmad_flow_write(t.flow, 1, t.src->mr, 0, &t.remote, 0, kChunk) != RDMAD_OK) return false;
        auto c = wait_completion(t.flow, 20s);
        last = c ? c->status : RDMAD_ERR_DAEMON_GONE;
        seen.insert(last);
        EXPECT_TRUE(last == RDMAD_ERR_PEER || last == RDMAD_ERR_NOT_FOUND) << rdmad_strerror(last);
        return last == RDMAD_ERR_NOT_FOUND;
      },
      30s);
  ASSERT_TRUE(not_found) << "last: " << rdmad_strerror(last) << "\n" << t.a().output() << t.b().output();
  EXPECT_EQ(seen.count(RDMAD_ERR_PEER), 1u) << "the import did not wait for the grant";
  // Not before the peer was back for the grace (it was back 2 s after the kill, at the earliest).
  EXPECT_GE(std::chrono::steady_clock::now() - killed, 5s);
}

// A session nobody takes back within [ipc] resume_grace_ms is released: its memory's descriptors
// leave the store, and the client that comes back later finds its registration lost.
TEST(Restart, SessionNotResumedWithinTheGraceIsReleased) {
  NodeSpec spec = two_nic_node("a", 30, "[ipc]\nresume_grace_ms = 300\n");
  spec.supervised = true;
  Node node(std::move(spec), free_port(SOCK_STREAM));
  ASSERT_TRUE(node.start({}));
  Buffer buf(node.client(), 1 << 20, kAllAccess);
  ASSERT_TRUE(node.restart());
  EXPECT_EQ(last_started_with(node.output()), 1) << node.output();
  EXPECT_TRUE(node.process()->wait_for_output("restored session expired", 5s)) << node.output();
  ASSERT_TRUE(node.restart());  // what the store passes now: the expired session's memfd is gone
  EXPECT_EQ(last_started_with(node.output()), 0) << node.output();
  rdmad_registration_info regs[4];
  size_t count = 0;
  ASSERT_EQ(rdmad_list_registrations(node.client(), regs, 4, &count), RDMAD_OK);
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(rdmad_mr_is_lost(buf.mr), 1);
}

}  // namespace
}  // namespace rdmad::test
