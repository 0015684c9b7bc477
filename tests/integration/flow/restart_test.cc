// Restarts that keep registrations (docs/operations.md, "Restarts that keep registrations"): two
// real daemons on loopback, one of them under rdmad-supervise, which keeps the descriptors it
// hands over and passes them back at the next start as systemd does (the systemd guest test,
// tests/vm, does the same under systemd). The application's client stays connected across the
// restart, as a training job's would.
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

// Imports `token` on `flow`, waiting for the exporter's grant (it comes again once the two daemons'
// session is back after a restart).
std::optional<rdmad_remote> import_when_granted(rdmad_flow* flow, const rdmad_token& token) {
  rdmad_remote remote{};
  rdmad_status s = RDMAD_ERR_NOT_FOUND;
  const bool granted = eventually(
      [&] {
        s = rdmad_flow_import(flow, &token, &remote);
        return s == RDMAD_OK;
      },
      15s);
  if (!granted) return std::nullopt;
  return remote;
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
// same handle, not lost), the requests in flight fail with an error it retries, and after it opens
// its flow again and imports the same token the transfer finishes byte-exact.
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
  rdmad_flow_close(t.flow);
  t.flow = nullptr;

  // The next call reconnects and takes the session back.
  rdmad_registration_info regs[4];
  size_t count = 0;
  ASSERT_EQ(rdmad_list_registrations(t.a().client(), regs, 4, &count), RDMAD_OK) << rdmad_last_error(t.a().client());
  const double serving_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(count, 1u) << t.a().output();
  EXPECT_EQ(regs[0].handle, handle);
  EXPECT_EQ(rdmad_mr_is_lost(t.src->mr), 0);
  EXPECT_EQ(rdmad_mr_handle(t.src->mr), handle);
  EXPECT_EQ(rdmad_mr_nic_count(t.src->mr), 2u);
  EXPECT_TRUE(t.a().process()->wait_for_output("session resumed", 5s)) << t.a().output();
  EXPECT_EQ(last_started_with(t.a().output()), 1) << "the registration's memfd was not kept\n" << t.a().output();
  RecordProperty("restart_to_serving_ms", std::to_string(serving_ms));
  std::printf("restart to serving the session again: %.0f ms\n", serving_ms);

  ASSERT_NO_FATAL_FAILURE(t.open_flow());
  auto remote = import_when_granted(t.flow, t.token);
  ASSERT_TRUE(remote) << "the token exported before the restart is no longer granted\n" << t.a().output();
  t.remote = *remote;
  std::vector<size_t> left;
  for (size_t c = 0; c < kChunks; ++c)
    if (done.count(c) == 0) left.push_back(c);
  for (size_t c : left) ASSERT_TRUE(post_chunks(t.flow, *t.src, t.remote, c, c + 1));
  EXPECT_EQ(complete(t.flow, left.size()).size(), left.size());
  t.check_bytes();
}

// The exporter's daemon restarts: its client keeps the registration, the export keeps its token
// (the writer imports the same one again once the daemons' session is back), and the memory it
// exported takes the rest of the transfer byte-exact.
TEST(Restart, ExportersDaemonRestartsAndItsTokenStaysValid) {
  Transfer t("b");
  ASSERT_NO_FATAL_FAILURE(t.open());
  const uint64_t handle = rdmad_mr_handle(t.dst->mr);
  ASSERT_TRUE(post_chunks(t.flow, *t.src, t.remote, 0, kChunks / 2));
  ASSERT_EQ(complete(t.flow, kChunks / 2).size(), kChunks / 2);
  ASSERT_TRUE(t.b().restart());

  rdmad_registration_info regs[4];
  size_t count = 0;
  ASSERT_EQ(rdmad_list_registrations(t.b().client(), regs, 4, &count), RDMAD_OK) << rdmad_last_error(t.b().client());
  ASSERT_EQ(count, 1u) << t.b().output();
  EXPECT_EQ(regs[0].handle, handle);
  EXPECT_EQ(rdmad_mr_is_lost(t.dst->mr), 0);
  EXPECT_TRUE(t.b().process()->wait_for_output("sessions restored sessions=1 handles=1 of=1 exports=1 of=1", 1s))
      << t.b().output();

  // The writer's flow survived (its daemon did not restart); its import went with the old session.
  ASSERT_EQ(rdmad_flow_wait_connected(t.flow, 15000), RDMAD_OK) << t.a().output();
  auto remote = import_when_granted(t.flow, t.token);
  ASSERT_TRUE(remote) << "the token did not survive the exporter's restart\n" << t.b().output();
  t.remote = *remote;
  ASSERT_TRUE(post_chunks(t.flow, *t.src, t.remote, kChunks / 2, kChunks));
  EXPECT_EQ(complete(t.flow, kChunks / 2).size(), kChunks / 2);
  t.check_bytes();
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
