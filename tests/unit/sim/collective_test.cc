// Collectives and the scenario language run end to end (issue 25, item 1): ring and
// halving-doubling AllReduce against hand-computed completion times (the phase dependency included),
// all-to-all against its bound, traffic staying on its rails on a rail-optimised fabric, per-link
// delays, and a mixed scenario in which every flow finishes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rdmad/sim/scenario.h"
#include "rdmad/sim/topology.h"
#include "scenario_helpers.h"

namespace rdmad::sim {
namespace {

using testing::run_scenario;

Scenario parse(const std::string& text, const std::vector<std::string>& o = {}) {
  std::vector<std::string> all = {"sim.progress=false"};
  all.insert(all.end(), o.begin(), o.end());
  return parse_scenario(text, std::filesystem::path(RDMAD_SOURCE_DIR) / "sim" / "workloads", all, "t.toml");
}

// Four hosts on one switch, 100 Gb/s, 1 µs links; `traffic` adds the sources.
Scenario star4(const std::string& traffic, const std::vector<std::string>& o = {}) {
  return parse(
      "[sim]\nduration_ms = 5\n[topology]\nkind = \"star\"\nsenders = 3\nhost_link_gbps = 100\n"
      "link_delay_ns = 1000\n" +
          traffic,
      o);
}

// A flow of P full packets on an idle two-hop path: packet i leaves at 85·i (1062 B at 100 Gb/s,
// rounded up to whole ns), the switch forwards it as it arrives, the last one reaches the receiver
// at 85·(P−1) + 85 + 1000 + 85 + 1000 = 85·(P+1) + 2000.
constexpr double step_ns(double packets) { return 85 * (packets + 1) + 2000; }

TEST(SimCollectives, RingAllReduceOnAStarTakesTwoNMinusOneSteps) {
  // N = 4 ranks, 4 MB each: 2(N−1) = 6 phases of size/N = 1 MB (1000 packets); no two flows share
  // a link (rank r sends to r+1 only), so each phase takes step_ns(1000) = 87,085 ns and the
  // collective 6 · 87,085 = 522,510 ns.
  const RunResults r =
      run_scenario(star4("[[traffic.source]]\nkind = \"allreduce\"\nsize_bytes = 4_000_000\n"));
  ASSERT_EQ(r.collectives.size(), 1u);
  const CollectiveResult& c = r.collectives[0];
  EXPECT_EQ(c.kind, "allreduce");
  EXPECT_EQ(c.algorithm, "ring");
  EXPECT_EQ(c.ranks, 4u);
  EXPECT_EQ(c.flows, 24u);
  EXPECT_EQ(c.flows_completed, 24u);
  ASSERT_EQ(c.phases_us.size(), 6u);
  for (size_t s = 0; s < 6; ++s) EXPECT_DOUBLE_EQ(c.phases_us[s], (s + 1) * step_ns(1000) / 1000) << s;
  EXPECT_DOUBLE_EQ(c.completion_us, 522.51);
  EXPECT_EQ(r.drops, 0u);
  EXPECT_EQ(r.flows_completed, r.flows_total);
}

TEST(SimCollectives, EachRankWaitsForTheDataOfItsPhaseBefore) {
  // host2's link is 50 µs long (a per-link delay on the generated star): the flows into and out of
  // host2 (1→2, 2→3) take 136,085 ns, the others 87,085, and no two flows ever share a port
  // (serialisation is the same everywhere; DCQCN off so nothing else moves). Phase s of rank r
  // waits for phase s−1 of rank r−1, so phase s ends with the longest chain of s+1 flows sent by
  // ranks r, r−1, …, r−s: 0: {2}; 1: {2,1}; 2: {2,1,0}; 3: every rank once; 4: {2,1,0,3,2};
  // 5: {2,1,0,3,2,1}, four slow and two fast flows. A timed schedule at the slowest phase would
  // end at 6 · 136,085 = 816,510 ns, one at the fastest at 522,510.
  const Scenario s = star4(
      "[[topology.link]]\na = \"host2\"\nb = \"sw0\"\ndelay_ns = 50000\n"
      "[[traffic.source]]\nkind = \"allreduce\"\nsize_bytes = 4_000_000\n",
      {"cc.enabled=false"});
  const RunResults r = run_scenario(s);
  ASSERT_EQ(r.collectives.size(), 1u);
  const double slow = step_ns(1000) + 49000;  // two 50 µs hops instead of 1 µs ones: 136,085
  const double fast = step_ns(1000);
  const std::vector<double> expected = {
      slow, 2 * slow, 2 * slow + fast, 2 * slow + 2 * fast, 3 * slow + 2 * fast, 4 * slow + 2 * fast};
  ASSERT_EQ(r.collectives[0].phases_us.size(), expected.size());
  for (size_t p = 0; p < expected.size(); ++p)
    EXPECT_DOUBLE_EQ(r.collectives[0].phases_us[p], expected[p] / 1000) << p;
  EXPECT_DOUBLE_EQ(r.collectives[0].completion_us, 718.51);
}

TEST(SimCollectives, HalvingDoublingExchangesHalvesThenDoubles) {
  // N = 4: reduce-scatter with partners 2 then 1 apart (2 MB, then 1 MB), all-gather back (1 MB,
  // 2 MB); every exchange is both ways on distinct links: 172,085 / 87,085 / 87,085 / 172,085 ns.
  const RunResults r = run_scenario(star4(
      "[[traffic.source]]\nkind = \"allreduce\"\nalgorithm = \"halving_doubling\"\nsize_bytes = 4_000_000\n"
      "start_us = 10\n"));
  ASSERT_EQ(r.collectives.size(), 1u);
  const CollectiveResult& c = r.collectives[0];
  EXPECT_EQ(c.algorithm, "halving_doubling");
  EXPECT_EQ(c.flows, 16u);
  EXPECT_DOUBLE_EQ(c.start_us, 10);
  const std::vector<double> ends = {step_ns(2000), step_ns(2000) + step_ns(1000),
                                    step_ns(2000) + 2 * step_ns(1000), 2 * step_ns(2000) + 2 * step_ns(1000)};
  ASSERT_EQ(c.phases_us.size(), 4u);
  for (size_t p = 0; p < 4; ++p) EXPECT_DOUBLE_EQ(c.phases_us[p], ends[p] / 1000) << p;
  EXPECT_DOUBLE_EQ(c.completion_us, 518.34);
}

TEST(SimCollectives, AllToAllOnAStarIsBoundByEachNicsBytes) {
  // Each of 4 ranks sends 1 MB to each other one: 3 MB (3000 packets) through its NIC and 3 MB
  // into it. Bound: 3000 · 85 ns of serialisation plus one packet's path (2 · 1000 + 85):
  // 257,085 ns. DCQCN, round-robin and three senders per receiver at a third of the line each
  // cost little more.
  const RunResults r =
      run_scenario(star4("[[traffic.source]]\nkind = \"alltoall\"\nsize_bytes = 1_000_000\n"));
  ASSERT_EQ(r.collectives.size(), 1u);
  const CollectiveResult& c = r.collectives[0];
  EXPECT_EQ(c.flows, 12u);
  EXPECT_EQ(c.flows_completed, 12u);
  EXPECT_GE(c.completion_us, 257.085);
  EXPECT_LE(c.completion_us, 257.085 * 1.01);
  EXPECT_EQ(c.algorithm, "");
}

// 16 hosts × 4 rails, one leaf per rail, 2 spines.
const char* kRail =
    "[sim]\nduration_ms = 5\n[topology]\nkind = \"rail\"\nhosts = 16\nrails = 4\nspines = 2\n";

TEST(SimCollectives, RailOptimisedCollectivesStayOnTheirRails) {
  const RunResults r = run_scenario(
      parse(std::string(kRail) +
            "[[traffic.source]]\nkind = \"allreduce\"\nsize_bytes = 1_600_000\n"
            "[[traffic.source]]\nkind = \"alltoall\"\nhosts = \"host0..host7\"\nsize_bytes = 40_000\n"));
  ASSERT_EQ(r.collectives.size(), 2u);
  EXPECT_EQ(r.collectives[0].rails, 4u);
  EXPECT_EQ(r.collectives[0].flows, 4u * 30 * 16);  // per rail 2(N−1) phases of N flows
  EXPECT_GT(r.collectives[0].completion_us, 0);
  EXPECT_EQ(r.collectives[1].flows, 8u * 7 * 4);
  EXPECT_EQ(r.flows_completed, r.flows_total);
  // Rank r's share on rail k leaves from its NIC k through leaf k and nothing else: no spine
  // carries data, and every NIC port talks to its own rail's leaf.
  size_t ports = 0;
  for (const PortSeries& ps : r.port_series) {
    if (ps.data_bytes == 0) continue;
    ++ports;
    EXPECT_EQ(ps.port.find("spine"), std::string::npos) << ps.port;
    const auto nic = ps.port.find(".nic");
    const auto leaf = ps.port.find("leaf");
    ASSERT_NE(nic, std::string::npos) << ps.port;
    ASSERT_NE(leaf, std::string::npos) << ps.port;
    EXPECT_EQ(ps.port[nic + 4], ps.port[leaf + 4]) << ps.port;  // NIC k ↔ leaf k
  }
  EXPECT_EQ(ports, 2u * 64);  // every NIC sends and receives
}

TEST(SimCollectives, CrossRailTrafficGoesThroughTheSpines) {
  const RunResults r =
      run_scenario(parse(std::string(kRail) + "[[traffic.source]]\nkind = \"flows\"\nsrc = \"host0.nic0\"\n"
                                              "dst = \"host1.nic3\"\nsize_bytes = 100_000\n"));
  EXPECT_EQ(r.flows_completed, 1u);
  std::vector<std::string> busy;
  for (const PortSeries& ps : r.port_series) {
    if (ps.data_bytes > 0) busy.push_back(ps.port);
  }
  // In port order: the NIC, leaf0 up to a spine, leaf3 down to the NIC, the spine down to leaf3.
  ASSERT_EQ(busy.size(), 4u);
  EXPECT_EQ(busy[0], "host0.nic0->leaf0");
  const std::string spine = busy[1].substr(busy[1].find("->") + 2);
  EXPECT_EQ(busy[1], "leaf0->" + spine);
  EXPECT_EQ(spine.rfind("spine", 0), 0u) << spine;
  EXPECT_EQ(busy[2], "leaf3->host1.nic3");
  EXPECT_EQ(busy[3], spine + "->leaf3");
}

TEST(SimLanguage, PerLinkDelaysGiveTheBaseRtt) {
  // h0 —300 ns— s —700 ns— h1 at 100 Gb/s; one 1000-byte packet (85 ns on the wire per hop).
  const std::string two_hops =
      "[sim]\nduration_ms = 1\n[topology]\nhost_link_gbps = 100\n"
      "[[topology.node]]\nname = \"h\"\ncount = 2\n[[topology.node]]\nname = \"s\"\nkind = \"switch\"\n"
      "[[topology.link]]\na = \"h0\"\nb = \"s\"\ndelay_ns = 300\n[[topology.link]]\na = \"h1\"\nb = \"s\"\n"
      "delay_ns = 700\n[[traffic.source]]\nkind = \"flows\"\nsrc = \"h0\"\ndst = \"h1\"\nsize_bytes = 1000\n";
  const RunResults r = run_scenario(parse(two_hops));
  ASSERT_EQ(r.fct.size(), 1u);
  // Arrival: 85 + 300 + 85 + 700. Ideal: base RTT 2·(300 + 700) + 2 · 1062·0.08, plus 1000·0.08.
  EXPECT_EQ(r.fct[0].fct_ns, 1170);
  EXPECT_EQ(r.fct[0].ideal_ns, 2249);
  // With ACKs the flow ends when the ACK (66 B, 6 ns a hop) is back: 1170 + 6 + 700 + 6 + 300.
  const RunResults acked = run_scenario(parse(two_hops, {"transport.acks=on"}));
  EXPECT_EQ(acked.fct[0].fct_ns, 2182);
}

TEST(SimLanguage, MixedLongFlowsIncastAndPoissonAllFinish) {
  const Scenario s =
      load_scenario(std::filesystem::path(RDMAD_SOURCE_DIR) / "sim/scenarios/mixed_incast_background.toml",
                    {"sim.progress=false"});
  ASSERT_EQ(s.traffic.sources.size(), 4u);
  const RunResults r = run_scenario(s);
  // 2 long flows, 16 senders × 4 bursts, 300 Poisson flows, 2 listed ones.
  EXPECT_EQ(r.flows_total, 2u + 64 + 300 + 2);
  EXPECT_EQ(r.flows_completed, r.flows_total);
  EXPECT_EQ(r.drops, 0u);
  EXPECT_EQ(r.jain_bursts.size(), 4u);  // one index per incast burst
  for (const FctRecord& f : r.fct) ASSERT_GE(f.slowdown, 1.0) << f.flow;
}

}  // namespace
}  // namespace rdmad::sim
