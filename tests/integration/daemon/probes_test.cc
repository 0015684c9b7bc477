// The kubelet's probes against real daemons, over real HTTP on the metrics port: /healthz answers
// only while the control loop does, /readyz only while a NIC is up and, once peers were tried, one
// of them is reachable (docs/operations.md, "Probes").
#include <sys/stat.h>

#include <chrono>
#include <regex>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "integration/flow/flow_cluster.h"
#include "support/free_port.h"
#include "support/http_get.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace rdmad::test {
namespace {

using namespace std::chrono_literals;

// GET path until the answer has `status` and contains `needle`, or the deadline passes; the last answer.
HttpResponse probe_until(int port, const std::string& path, int status, const std::string& needle,
                         std::chrono::milliseconds deadline) {
  HttpResponse last;
  eventually(
      [&] {
        const auto r = http_get("127.0.0.1", port, path);
        if (r) last = *r;
        return r && r->status == status && r->body.find(needle) != std::string::npos;
      },
      deadline);
  return last;
}

// One rdmad on `extra` (NICs, peers); returns the metrics port it printed, 0 with a failure.
struct Daemon {
  TempDir dir;
  std::unique_ptr<Subprocess> proc;

  int start(const std::string& extra, std::vector<std::string> args = {}) {
    const std::string config = dir.write(
        "rdmad.toml", fmt::format("[daemon]\nruntime_dir = \"{0}/run\"\nsocket_path = \"{0}/run/rdmad.sock\"\n"
                                  "[metrics]\nlisten = \"127.0.0.1:0\"\nprobe_timeout_ms = 300\n{1}",
                                  dir.path(), extra));
    std::vector<std::string> argv{binary("daemon/rdmad"), "--config", config};
    argv.insert(argv.end(), args.begin(), args.end());
    proc = std::make_unique<Subprocess>(std::move(argv));
    EXPECT_TRUE(proc->wait_for_output("] ready", 15s)) << proc->output();
    std::smatch m;
    const std::string out = proc->output();
    if (!std::regex_search(out, m, std::regex(R"(serving metrics url=http://127\.0\.0\.1:(\d+)/metrics)"))) {
      ADD_FAILURE() << "no metrics URL:\n" << out;
      return 0;
    }
    return std::stoi(m[1]);
  }
};

NodeSpec node(const std::string& id, const std::string& address) {
  NodeSpec spec;
  spec.id = id;
  NicSpec nic;
  nic.address = address;
  spec.nics = {nic};
  return spec;
}

constexpr const char* kSoftNic = "[[nic]]\nname = \"rail0\"\nbackend = \"soft\"\naddress = \"127.0.0.1\"\nudp_port = 0\n";

TEST(Probes, HealthyNodeIsLiveAndReady) {
  Daemon d;
  const int port = d.start(kSoftNic);
  ASSERT_GT(port, 0);
  auto r = probe_until(port, "/healthz", 200, "ok", 5s);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "ok\n");
  r = probe_until(port, "/readyz", 200, "ready", 5s);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "ready\n");
  const auto m = http_get("127.0.0.1", port, "/metrics");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->status, 200);
}

// A hardware NIC that cannot open keeps its slot out of service: no NIC is up, so the node is live
// but not ready, and says why.
TEST(Probes, NoNicUpIsLiveButNotReady) {
  Daemon d;
  const int port = d.start("[[nic]]\nname = \"rail0\"\nbackend = \"rdma_core\"\ndevice = \"mlx5_77\"\n");
  ASSERT_GT(port, 0);
  EXPECT_EQ(probe_until(port, "/healthz", 200, "ok", 5s).status, 200);
  const auto r = probe_until(port, "/readyz", 503, "no NIC up", 5s);
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("not ready: no NIC up; nic rail0 out of service"), std::string::npos) << r.body;
}

// A node whose only peer does not answer is not ready; once the peer is up, it is.
TEST(Probes, NotReadyUntilAPeerIsReachable) {
  const int b_port = free_port(SOCK_STREAM);
  Node a(node("nodeA", "127.0.0.1"), free_port(SOCK_STREAM));
  ASSERT_TRUE(a.start({{"nodeB", b_port}}));
  auto r = probe_until(a.metrics_port(), "/readyz", 503, "no peer reachable", 10s);
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("no peer reachable: 1 known, 1 tried"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("peer nodeB"), std::string::npos) << r.body;
  EXPECT_EQ(probe_until(a.metrics_port(), "/healthz", 200, "ok", 5s).status, 200);

  Node b(node("nodeB", "127.0.0.2"), b_port);
  ASSERT_TRUE(b.start({}));
  r = probe_until(a.metrics_port(), "/readyz", 200, "ready", 20s);
  EXPECT_EQ(r.status, 200) << r.body << a.output();
  // B knows A only once A dialled it: it was never without a reachable peer.
  EXPECT_EQ(probe_until(b.metrics_port(), "/readyz", 200, "ready", 10s).status, 200);
}

// The liveness probe exercises the control loop: while it is stuck in one handler, /healthz
// answers 503 after [metrics] probe_timeout_ms (and so does /readyz); afterwards 200 again.
TEST(Probes, StalledControlLoopIsNotLive) {
  Daemon d;
  const int port = d.start(kSoftNic, {"--enable-test-hooks"});
  ASSERT_GT(port, 0);
  ASSERT_EQ(probe_until(port, "/healthz", 200, "ok", 5s).status, 200);
  Subprocess ctl({binary("tools/rdmactl/rdmactl"), "--socket", d.dir.path() + "/run/rdmad.sock", "debug", "stall",
                  "control", "3"});
  ASSERT_EQ(ctl.wait_exit(10s).value_or(-1), 0) << ctl.output();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = probe_until(port, "/healthz", 503, "control loop did not answer within 300 ms", 3s);
  EXPECT_EQ(r.status, 503) << r.body << d.proc->output();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2500ms);  // during the 3 s stall
  r = probe_until(port, "/readyz", 503, "control loop", 1s);
  EXPECT_EQ(r.status, 503) << r.body;
  r = probe_until(port, "/healthz", 200, "ok", 10s);
  EXPECT_EQ(r.status, 200) << r.body;
}

}  // namespace
}  // namespace rdmad::test
