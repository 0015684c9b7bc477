// One local user takes all it can — 2,000 connections, flows to a node that does not exist,
// registrations until refused — while root keeps registering and transferring between two real
// daemons: root's work completes byte-exact, /metrics answers, the daemon's log stays bounded,
// and once the hog is gone the daemon's descriptors and memory are back where they were.
#include <signal.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "integration/flow/flow_cluster.h"
#include "security/local_users.h"

namespace rdmad::security {
namespace {

using namespace std::chrono_literals;
using test::Buffer;

constexpr size_t kLogBound = 100;  // lines the hog may cause in the daemon's log

size_t fd_count(pid_t pid) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    (void)e;
    ++n;
  }
  return n;
}

uint64_t rss_kib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  return 0;
}

size_t lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

// Root's round: register a fresh buffer on each node, export, import, write, check every byte.
void transfer_round(test::Pair& pair, rdmad_flow* flow, size_t bytes, uint8_t seed) {
  Buffer src(pair.a->client(), bytes, test::kAllAccess);
  Buffer dst(pair.b->client(), bytes, test::kAllAccess);
  for (size_t i = 0; i < bytes; ++i) src.data()[i] = static_cast<uint8_t>(i * 7 + seed);
  rdmad_token token{};
  ASSERT_EQ(rdmad_export(pair.b->client(), dst.mr, 0, bytes, "node-a", RDMAD_ACCESS_REMOTE_WRITE, &token), RDMAD_OK)
      << rdmad_last_error(pair.b->client());
  rdmad_remote remote{};
  ASSERT_EQ(rdmad_flow_import(flow, &token, &remote), RDMAD_OK) << rdmad_last_error(pair.a->client());
  ASSERT_EQ(rdmad_flow_write(flow, seed, src.mr, 0, &remote, 0, bytes), RDMAD_OK);
  auto c = test::wait_completion(flow, 30s);
  ASSERT_TRUE(c.has_value());
  ASSERT_EQ(c->status, RDMAD_OK);
  EXPECT_EQ(test::first_difference(src.data(), dst.data(), bytes), -1);
  ASSERT_EQ(rdmad_revoke(pair.b->client(), &token), RDMAD_OK);
}

TEST(LocalExhaustion, OneUserTakingEverythingLeavesOthersServedAndTheDaemonWhole) {
  test::Pair pair(open_node("node-a", 41), open_node("node-b", 43));
  ASSERT_TRUE(pair.start());
  open_to_others(pair.a->socket_path());
  rdmad_flow* flow = nullptr;
  ASSERT_EQ(rdmad_flow_open(pair.a->client(), "node-b", nullptr, &flow), RDMAD_OK);
  ASSERT_EQ(rdmad_flow_wait_connected(flow, 10000), RDMAD_OK);
  transfer_round(pair, flow, 4 << 20, 1);  // warm: what a served node holds anyway
  const pid_t daemon = pair.a->process()->pid();
  const size_t fds_before = fd_count(daemon);
  const uint64_t rss_before = rss_kib(daemon);
  const size_t log_before = lines(pair.a->output());

  test::Subprocess hog({test::binary("tests/security/local/security_local_hog"), pair.a->socket_path(),
                        std::to_string(kNobody), "2000", "1200", "20000"});
  ASSERT_TRUE(hog.wait_for_output("hog: connections", 120s)) << hog.output();
  const std::string got = hog.output();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(got, m, std::regex(R"(connections (\d+) refused (\d+), flows (\d+) refused (\d+), registrations (\d+) refused (\d+))")))
      << got;
  // Its quotas held: 1024 connections, 1024 flows, a quarter of the soft NIC's 65,535-entry table.
  EXPECT_LE(std::stoi(m[1]), 1024) << got;
  EXPECT_GT(std::stoi(m[2]), 0) << got;
  EXPECT_LE(std::stoi(m[3]), 1024) << got;
  EXPECT_GT(std::stoi(m[6]), 0) << got;
  EXPECT_LE(std::stoi(m[5]), 65535 / 4) << got;

  // Everyone else: served while the hog holds all that.
  for (uint8_t round = 2; round < 5; ++round) transfer_round(pair, flow, 4 << 20, round);
  EXPECT_TRUE(pair.a->metric("rdmad_clients_connected").has_value()) << "/metrics did not answer";
  const size_t caused = lines(pair.a->output()) - log_before;
  EXPECT_LE(caused, kLogBound) << pair.a->output().substr(pair.a->output().size() > 20000 ? pair.a->output().size() - 20000 : 0);

  hog.signal(SIGKILL);
  ASSERT_TRUE(hog.wait_exit(10s).has_value());
  EXPECT_TRUE(test::eventually([&] { return fd_count(daemon) <= fds_before + 2; }, 20s))
      << fd_count(daemon) << " descriptors open, " << fds_before << " before the hog";
  transfer_round(pair, flow, 4 << 20, 9);
  // The allocator keeps some of what it was given; tens of MB would be a leak.
  EXPECT_LT(rss_kib(daemon), rss_before + 32 * 1024) << rss_kib(daemon) << " KiB, " << rss_before << " before";
  rdmad_flow_close(flow);
}

}  // namespace
}  // namespace rdmad::security
