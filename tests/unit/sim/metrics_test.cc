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
  const RunResults r = testing::run_scenario(two_into_one(
      {"traffic.kind=\"incast\"", "traffic.size_bytes=500000", "traffic.bursts=3",
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

}  // namespace
}  // namespace rdmad::sim
