// End-to-end simulator tests: line rate, losslessness, fairness and convergence of the cc/ DCQCN
// engine, late joiners, routing on every topology, determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "rdmad/sim/output.h"
#include "rdmad/sim/simulator.h"
#include "scenario_helpers.h"

namespace rdmad::sim {
namespace {

using testing::fresh_dir;
using testing::read_file;
using testing::run_scenario;
using testing::star_long_flows;

TEST(FabricTest, SingleFlowRunsAtLineRateWithoutQueueing) {
  RunResults r = run_scenario(star_long_flows(1, {"sim.duration_ms=5", "sim.warmup_ms=1"}));
  EXPECT_GE(r.bottleneck_utilization, 0.99);
  EXPECT_EQ(r.cnps_sent, 0u);
  EXPECT_EQ(r.pfc_pauses, 0u);
  EXPECT_LE(r.queue_bytes.max, 2 * 1062);
}

TEST(FabricTest, ShortFlowOnIdleFabricHasSlowdownOneAndExactBytes) {
  RunResults r = run_scenario(star_long_flows(
      1, {"traffic.kind=\"incast\"", "traffic.size_bytes=100000", "sim.duration_ms=1", "sim.warmup_ms=0"}));
  ASSERT_EQ(r.fct.size(), 1u);
  const FctRecord& f = r.fct[0];
  ASSERT_GE(f.fct_ns, 0);
  // 100 payload packets of 1000 B + 62 B header at 100 Gb/s, two 1 µs links, one store-and-forward.
  const double wire_ns = 100 * 1062 * 0.08;
  EXPECT_NEAR(static_cast<double>(f.fct_ns), wire_ns + 2000 + 1062 * 0.08, 100);
  EXPECT_EQ(f.slowdown, 1.0);
  EXPECT_EQ(r.flows_completed, 1u);
}

TEST(FabricTest, IncastIsLosslessWithPfcAndLossyWithout) {
  const std::vector<std::string> burst = {"traffic.kind=\"incast\"", "traffic.size_bytes=300000",
                                          "switch.buffer_bytes=2000000", "sim.duration_ms=5",
                                          "sim.warmup_ms=0"};
  RunResults lossless = run_scenario(star_long_flows(16, burst));
  EXPECT_EQ(lossless.drops, 0u);
  EXPECT_GT(lossless.pfc_pauses, 0u);
  EXPECT_EQ(lossless.flows_completed, 16u);  // every byte of every flow arrived
  for (const auto& f : lossless.fct) EXPECT_GE(f.slowdown, 1.0);

  auto lossy_cfg = burst;
  lossy_cfg.push_back("switch.pfc=false");
  lossy_cfg.push_back("cc.enabled=false");
  RunResults lossy = run_scenario(star_long_flows(16, lossy_cfg));
  EXPECT_GT(lossy.drops, 0u);
  EXPECT_EQ(lossy.pfc_pauses, 0u);
  EXPECT_LE(lossy.queue_bytes.max, 2000000);
}

// A 64:1 burst cuts many QPs to the 1 Mb/s floor while they wait to send: a packet paced 8.5 ms
// out. A cut after that must not move the wait further (only a rise re-paces it), or the packet
// leaves on time but counts as sent 8.5 ms later, and the QP stalls long after its rate recovered
// (before the fix, 31 of the 64 flows were still unfinished after 6 ms).
TEST(FabricTest, IncastFlowsCutToTheFloorRecoverAndFinish) {
  RunResults r = run_scenario(star_long_flows(
      64, {"traffic.kind=\"incast\"", "traffic.size_bytes=200000", "sim.duration_ms=6", "sim.warmup_ms=0"}));
  EXPECT_EQ(r.drops, 0u);
  EXPECT_EQ(r.flows_completed, 64u);
  for (const auto& f : r.fct) EXPECT_LT(f.fct_ns, 3'000'000) << "flow " << f.flow;
}

TEST(FabricTest, EveryTopologyRoutesEveryFlow) {
  for (const char* topo :
       {"kind=\"fattree\"\nk=4", "kind=\"leafspine\"\nleaves=3\nspines=2\nhosts_per_leaf=4",
        "kind=\"dumbbell\"\nsenders=4", "kind=\"star\"\nsenders=6"}) {
    Scenario s =
        parse_scenario(std::string("[topology]\n") + topo +
                           "\n[traffic]\nkind=\"poisson\"\ncdf=\"fb_hadoop.cdf\"\nload=0.3\nflow_count=300\n"
                           "[sim]\nduration_ms=200\nprogress=false\n",
                       std::filesystem::path(RDMAD_SOURCE_DIR) / "sim" / "workloads");
    RunResults r = run_scenario(s);
    EXPECT_EQ(r.flows_completed, 300u) << topo;
    EXPECT_EQ(r.drops, 0u) << topo;
    for (const auto& f : r.fct) ASSERT_GE(f.slowdown, 1.0) << topo;
  }
}

// sim/scenarios/star_convergence.toml: N long flows into one 100 Gb/s receiver, cc/ mlx5 profile,
// PFC on, RED 50 KB / 200 KB / 30%, measured over four 10 ms windows after 150 ms of convergence
// (docs/simulator.md, "Convergence": why these thresholds, how long convergence takes, the seed
// sweep behind them, and what still fails).
Scenario mlx5_convergence(uint32_t n) {
  return load_scenario(std::filesystem::path(RDMAD_SOURCE_DIR) / "sim" / "scenarios" / "star_convergence.toml",
                       {"topology.senders=" + std::to_string(n), "sim.progress=false"});
}

class ConvergenceTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(ConvergenceTest, Mlx5ProfileIsFairBusyShallowAndLossless) {
  const uint32_t n = GetParam();
  const Scenario s = mlx5_convergence(n);
  RunResults r = run_scenario(s);
  std::printf(
      "N=%u jain_min=%.4f jain_mean=%.4f util=%.4f queue_p99=%.0f max=%.0f kmax=%llu pauses=%llu drops=%llu\n",
      n, r.jain_index, r.jain_index_mean, r.bottleneck_utilization, r.queue_bytes.p99, r.queue_bytes.max,
      static_cast<unsigned long long>(s.sw.kmax_bytes), static_cast<unsigned long long>(r.pfc_pauses),
      static_cast<unsigned long long>(r.drops));
  ASSERT_EQ(r.jain_windows.size(), 4u);
  EXPECT_GE(r.jain_index, 0.99);  // the minimum over the windows
  EXPECT_GE(r.bottleneck_utilization, 0.95);
  EXPECT_LT(r.queue_bytes.p99, static_cast<double>(s.sw.kmax_bytes));
  EXPECT_EQ(r.drops, 0u);
}

// The same runs with the SIGCOMM'15 profile (Rt ← Rc at every cut, 55 µs timers, 10 MB byte counter):
// utilisation, queue and loss criteria hold; Jain is 0.978–0.991 (docs/simulator.md).
TEST_P(ConvergenceTest, PaperProfileKeepsQueueBelowKmaxAtFullUtilisation) {
  const uint32_t n = GetParam();
  Scenario s = star_long_flows(n, {"cc.profile=\"paper\""});
  RunResults r = run_scenario(s);
  std::printf("paper N=%u jain_min=%.4f util=%.4f queue_p99=%.0f pauses=%llu drops=%llu\n", n, r.jain_index,
              r.bottleneck_utilization, r.queue_bytes.p99, static_cast<unsigned long long>(r.pfc_pauses),
              static_cast<unsigned long long>(r.drops));
  ASSERT_EQ(r.jain_windows.size(), 4u);
  EXPECT_GE(r.jain_index, 0.97);
  EXPECT_GE(r.bottleneck_utilization, 0.95);
  EXPECT_LT(r.queue_bytes.p99, static_cast<double>(s.sw.kmax_bytes));
  EXPECT_EQ(r.drops, 0u);
  EXPECT_EQ(r.pfc_pauses, 0u);
}

INSTANTIATE_TEST_SUITE_P(Senders, ConvergenceTest, ::testing::Values(2u, 4u, 8u, 16u));

// Two flows; the second joins at 10 ms, must reach its fair share quickly and then share fairly.
TEST(FabricTest, LateJoinerReachesFairShare) {
  RunResults r = run_scenario(
      star_long_flows(2, {"traffic.stagger_us=10000", "sim.duration_ms=42", "sim.warmup_ms=12"}));
  // Delivered payload rate of flow 1 averaged over 500 µs (50 samples of 10 µs).
  double sum = 0;
  int count = 0;
  SimTimeNs reached = -1;
  const double fair_gbps = 100.0 * 1000 / 1062 / 2;  // payload share of a 100 Gb/s link
  for (const auto& s : r.rates) {
    if (s.flow != 1) continue;
    sum += s.delivered_gbps;
    if (++count < 50) continue;
    if (sum / count >= 0.9 * fair_gbps) {
      reached = s.time_ns;
      break;
    }
    sum = 0;
    count = 0;
  }
  ASSERT_GE(reached, 0) << "flow 1 never came within 10% of its fair share";
  std::printf("late joiner within 10%% of its fair share %.2f ms after joining\n",
              (reached - 10'000'000) / 1e6);
  EXPECT_LE(reached - 10'000'000, 2'000'000);
  ASSERT_EQ(r.jain_windows.size(), 3u);
  EXPECT_GE(r.jain_index, 0.99);  // from 2 ms after the join on, every 10 ms window is fair
}

TEST(FabricTest, SameSeedGivesByteIdenticalOutputs) {
  auto run_to = [](const std::string& name, uint64_t seed) {
    Scenario s = parse_scenario(
        "[topology]\nkind=\"leafspine\"\nleaves=2\nspines=2\nhosts_per_leaf=4\n"
        "[traffic]\nkind=\"poisson\"\ncdf=\"websearch.cdf\"\nload=0.5\nflow_count=60\n"
        "[sim]\nduration_ms=100\nprogress=false\n[output]\nmax_rate_flows=8\n",
        std::filesystem::path(RDMAD_SOURCE_DIR) / "sim" / "workloads", {"sim.seed=" + std::to_string(seed)});
    s.name = "determinism";
    RunResults r = run_scenario(s);
    r.wall_seconds = 0;  // the only field that depends on the machine
    auto dir = fresh_dir(name);
    write_outputs(r, dir);
    return dir;
  };
  auto a = run_to("a", 5);
  auto b = run_to("b", 5);
  auto c = run_to("c", 6);
  for (const char* file : {"summary.json", "fct.csv", "rates.csv", "queues.csv", "utilization.csv",
                           "topology_nodes.csv", "topology_links.csv"}) {
    std::string x = read_file(a / file);
    EXPECT_GT(x.size(), 40u) << file;
    EXPECT_EQ(x, read_file(b / file)) << file;
  }
  EXPECT_NE(read_file(a / "fct.csv"), read_file(c / "fct.csv"));
}

}  // namespace
}  // namespace rdmad::sim
