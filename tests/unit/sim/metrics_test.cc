// The summary's utilisation and fairness figures against hand-computed answers (issue 25: on
// leaf-spine the average took in ports that carry only CNPs, and incast bursts had no Jain index).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "rdmad/sim/results.h"
#include "rdmad/sim/scenario.h"
#include "scenario_helpers.h"

namespace rdmad::sim {
namespace {

// 2 leaves × 2 hosts, 1 spine, 100 Gb/s everywhere: host0 and host1 (leaf0) send long flows to
// host3 (leaf1). Host-facing switch ports: leaf0->host0, leaf0->host1 (CNPs only), leaf1->host2
// (idle), leaf1->host3 (the receiver link, all the data).
Scenario two_into_one(const std::vector<std::string>& overrides) {
  std::vector<std::string> o = {"sim.progress=false"};
  o.insert(o.end(), overrides.begin(), overrides.end());
  return parse_scenario(R"(
[sim]
duration_ms = 4
warmup_ms = 1
sample_interval_us = 10
[topology]
kind = "leafspine"
leaves = 2
spines = 1
hosts_per_leaf = 2
host_link_gbps = 100
fabric_link_gbps = 100
link_delay_ns = 1000
[switch]
pfc = true
[traffic]
kind = "long"
flows = 2
[cc]
profile = "mlx5"
)",
                        "/", o, "two_into_one");
}

const PortUtilization& port(const RunResults& r, const std::string& name) {
  for (size_t i = 0; i < r.port_names.size(); ++i) {
    if (r.port_names[i] == name) return r.port_utilization.at(i);
  }
  ADD_FAILURE() << "no port " << name;
  static const PortUtilization none;
  return none;
}

TEST(SimMetrics, ReceiverLinkUtilisationOfTwoCappedSendersIsTheirSumOverCapacity) {
  // rpg_max_rate = 30 Gb/s each, paced on wire bytes: 2 × 30 / 100 = 0.6 of the receiver link, no
  // queue, no CNPs.
  const RunResults r = testing::run_scenario(two_into_one({"cc.knobs.rpg_max_rate=30000"}));
  ASSERT_EQ(r.port_utilization.size(), r.port_names.size());
  const PortUtilization& rx = port(r, "leaf1->host3");
  EXPECT_NEAR(rx.busy_utilization, 0.6, 0.005);
  EXPECT_NEAR(rx.busy_ms, 3.0, 0.011);  // every 10 µs interval of the 3 ms after warm-up
  EXPECT_NEAR(r.bottleneck_utilization, 0.6, 0.005);
  EXPECT_EQ(port(r, "leaf1->host2").data_bytes, 0u);
}

TEST(SimMetrics, PortsThatCarryOnlyCnpsDoNotCountInTheUtilisation) {
  // Uncapped: 2 × 100 Gb/s offered to a 100 Gb/s link, lossless (PFC): the offered load bounds the
  // receiver link's utilisation by min(1, 200/100) = 1; DCQCN's cuts let its queue run dry now and
  // then (0.974 measured), hence the lower bound. The ports toward the senders carry the CNPs and no
  // data; the old average over every host-facing port that sent anything gave ≈ (0.97 + 2·0.0x)/3.
  const RunResults r = testing::run_scenario(two_into_one({}));
  ASSERT_GT(r.cnps_sent, 0u);
  const PortUtilization& rx = port(r, "leaf1->host3");
  EXPECT_GT(rx.busy_utilization, 0.95);
  EXPECT_LE(rx.busy_utilization, 1.0);
  for (const char* to_sender : {"leaf0->host0", "leaf0->host1"}) {
    EXPECT_EQ(port(r, to_sender).data_bytes, 0u) << to_sender;
    EXPECT_GT(port(r, to_sender).utilization, 0) << to_sender;  // the CNPs
  }
  EXPECT_DOUBLE_EQ(r.bottleneck_utilization, rx.busy_utilization);
}

TEST(SimMetrics, IncastBurstsHaveAJainIndexAndUtilisationOverTheBusyTime) {
  // Three bursts of 2 × 500 KB, 1 ms apart, no CC: each keeps the receiver link busy for
  // 2·500 packets·1062 B·8 / 100 Gb/s = 84.96 µs; over the busy time the link is (almost) full, over
  // the whole run (which ends when the last flow does) 3·84.96 µs / simulated time.
  const RunResults r = testing::run_scenario(
      two_into_one({"traffic.kind=\"incast\"", "traffic.size_bytes=500000", "traffic.bursts=3",
                    "traffic.burst_interval_us=1000", "sim.warmup_ms=0", "cc.enabled=false"}));
  ASSERT_EQ(r.flows_completed, 6u);
  ASSERT_EQ(r.jain_bursts.size(), 3u);
  for (double j : r.jain_bursts) EXPECT_GT(j, 0.99);  // equal senders, one shared link
  EXPECT_EQ(r.jain_index, *std::min_element(r.jain_bursts.begin(), r.jain_bursts.end()));
  const PortUtilization& rx = port(r, "leaf1->host3");
  // Busy intervals are whole 10 µs sample intervals, so each burst's first and last are partly idle:
  // 85 µs of data over at most 100 µs of intervals.
  EXPECT_GT(rx.busy_utilization, 0.85);
  EXPECT_LE(rx.busy_utilization, 1.0);
  EXPECT_NEAR(rx.utilization, 3 * 0.08496 / r.simulated_ms, 0.01);
  EXPECT_DOUBLE_EQ(r.bottleneck_utilization, rx.busy_utilization);
}

TEST(SimMetrics, IncastBurstsOfCappedSendersReadTheirSumOverCapacityWhileBusy) {
  // Hand-computed: two senders capped at 30 Gb/s (rpg_max_rate, paced on wire bytes) send a
  // 500 KB burst each to host3, three bursts 1 ms apart. While a burst lasts, the receiver link
  // carries 2 × 30 / 100 = 0.6 of its capacity: 500 packets · 1062 B · 8 / 30 Gb/s = 141.6 µs per
  // burst. Busy time is counted in whole 1 µs sample intervals, so each burst's first and last add
  // at most 2 µs of idle: 0.6 · 141.6 / 143.6 = 0.592 ≤ utilisation ≤ 0.6. Over the whole run the
  // same port reads 3 · 0.6 · 141.6 µs / simulated time, the figure the old average stood near.
  const RunResults r = testing::run_scenario(
      two_into_one({"traffic.kind=\"incast\"", "traffic.size_bytes=500000", "traffic.bursts=3",
                    "traffic.burst_interval_us=1000", "sim.warmup_ms=0", "sim.sample_interval_us=1",
                    "cc.knobs.rpg_max_rate=30000"}));
  ASSERT_EQ(r.flows_completed, 6u);
  const PortUtilization& rx = port(r, "leaf1->host3");
  EXPECT_GE(rx.busy_utilization, 0.592);
  EXPECT_LE(rx.busy_utilization, 0.6001);
  EXPECT_NEAR(rx.busy_ms, 3 * 0.1416, 3 * 0.002);
  EXPECT_DOUBLE_EQ(r.bottleneck_utilization, rx.busy_utilization);
  EXPECT_NEAR(rx.utilization, 3 * 0.6 * 0.1416 / r.simulated_ms, 0.005);
  ASSERT_EQ(r.jain_bursts.size(), 3u);
  for (double j : r.jain_bursts) EXPECT_GT(j, 0.999);  // both capped at the same rate
}

const PortSeries& series(const RunResults& r, const std::string& name) {
  for (const PortSeries& s : r.port_series) {
    if (s.port == name) return s;
  }
  ADD_FAILURE() << "no series for " << name;
  static const PortSeries none;
  return none;
}

TEST(SimMetrics, PortSeriesShowEachPortsUtilisationInABoundedNumberOfSamples) {
  // 4 ms in 10 µs samples is 400; with output.series_samples = 16 neighbours merge until 8 to 16
  // samples of 320 or 640 µs remain, covering the run without a gap.
  const RunResults r =
      testing::run_scenario(two_into_one({"cc.knobs.rpg_max_rate=30000", "output.series_samples=16"}));
  ASSERT_GE(r.series_start_ns.size(), 8u);
  ASSERT_LE(r.series_start_ns.size(), 16u);
  SimTimeNs covered = 0;
  for (size_t k = 0; k < r.series_start_ns.size(); ++k) {
    EXPECT_EQ(r.series_start_ns[k], covered) << k;
    covered += r.series_width_ns[k];
  }
  EXPECT_EQ(static_cast<double>(covered) / 1e6, r.simulated_ms);
  // The receiver link at 2 × 30 / 100 once both flows run (after the first sample); each sender's
  // uplink at 0.3; the spine's link down to leaf1 (100 Gb/s) carries both flows too.
  for (const auto& [name, share] : std::vector<std::pair<std::string, double>>{
           {"leaf1->host3", 0.6}, {"host0->leaf0", 0.3}, {"host1->leaf0", 0.3}, {"spine0->leaf1", 0.6}}) {
    const PortSeries& s = series(r, name);
    ASSERT_EQ(s.utilization.size(), r.series_start_ns.size()) << name;
    for (size_t k = 1; k < s.utilization.size(); ++k)
      EXPECT_NEAR(s.utilization[k], share, 0.01) << name << " " << k;
  }
  // Ports that sent no data have no utilisation series (leaf0->host0 carries only CNPs, and capped
  // senders get none); nothing was paused.
  for (const PortSeries& s : r.port_series) EXPECT_GT(s.data_bytes, 0) << s.port;
  EXPECT_EQ(r.pfc_paused_ms, 0);
}

TEST(SimMetrics, PauseSeriesAddUpToThePausedTime) {
  // A 64:1-style incast into a buffer too small for it: PFC pauses the senders' NICs. Each port's
  // pause series, weighted by sample width, adds up to its paused time, and those to the summary's.
  const RunResults r = testing::run_scenario(
      two_into_one({"topology.hosts_per_leaf=8", "traffic.kind=\"incast\"", "traffic.size_bytes=200000",
                    "traffic.bursts=2", "traffic.burst_interval_us=1000", "sim.warmup_ms=0",
                    "cc.enabled=false", "switch.buffer_bytes=300000", "switch.headroom_bytes=20000"}));
  ASSERT_GT(r.pfc_pauses, 0u);
  double total_ms = 0;
  for (const PortSeries& s : r.port_series) {
    double ns = 0;
    for (size_t k = 0; k < s.paused.size(); ++k) {
      EXPECT_GE(s.paused[k], 0) << s.port;
      EXPECT_LE(s.paused[k], 1) << s.port;
      ns += s.paused[k] * static_cast<double>(r.series_width_ns[k]);
    }
    EXPECT_NEAR(ns / 1e6, s.paused_ms, 1e-6) << s.port;
    total_ms += s.paused_ms;
  }
  EXPECT_GT(total_ms, 0);
  EXPECT_NEAR(total_ms, r.pfc_paused_ms, 1e-6);
}

TEST(SimMetrics, TopologySketchPutsHostsLeavesAndSpinesOnTheirLevels) {
  const RunResults r = testing::run_scenario(two_into_one({"sim.duration_ms=0.1"}));
  ASSERT_EQ(r.sketch_nodes.size(), 7u);  // 4 hosts, 2 leaves, 1 spine
  std::vector<std::pair<std::string, uint32_t>> levels;
  for (const SketchNode& n : r.sketch_nodes) {
    levels.emplace_back(n.name, n.level);
    EXPECT_GT(n.x, 0);
    EXPECT_LT(n.x, 1);
  }
  EXPECT_EQ(levels, (std::vector<std::pair<std::string, uint32_t>>{{"host0", 0},
                                                                   {"host1", 0},
                                                                   {"host2", 0},
                                                                   {"host3", 0},
                                                                   {"leaf0", 1},
                                                                   {"leaf1", 1},
                                                                   {"spine0", 2}}));
  EXPECT_EQ(r.sketch_links.size(), 6u);
}

}  // namespace
}  // namespace rdmad::sim
