// How bytes are split over lanes: measured throughput, the quarter rule, congestion, policies,
// PCI distance and chunking.
#include <gtest/gtest.h>

#include <array>
#include <set>

#include "balancer_test_util.h"

namespace rdmad::balancer::test {
namespace {

constexpr double kGBps = 1e9;

BalancerConfig config(Policy p = Policy::kWeighted) {
  BalancerConfig c;
  c.policy = p;
  c.chunk_bytes = 64 << 10;
  return c;
}

TEST(BalancerSplit, TwoEqualNicsSplitWithinFivePercent) {
  Balancer b(config(), lanes(2));
  uint64_t now = 0;
  auto carried = run(b, {10 * kGBps, 10 * kGBps}, 300, 4 << 20, &now);
  EXPECT_NEAR(share(carried, 0), 0.5, 0.05);
  EXPECT_NEAR(share(carried, 1), 0.5, 0.05);
}

TEST(BalancerSplit, PathWithHalfTheMeasuredThroughputCarriesAThird) {
  Balancer b(config(), lanes(2));
  uint64_t now = 0;
  run(b, {10 * kGBps, 5 * kGBps}, 20, 4 << 20, &now);  // learn
  auto carried = run(b, {10 * kGBps, 5 * kGBps}, 300, 4 << 20, &now);
  EXPECT_NEAR(share(carried, 1), 1.0 / 3, 0.03);
  EXPECT_NEAR(b.weight(1), 1.0 / 3, 0.05);
  EXPECT_NEAR(b.stats(1).throughput_bytes_per_s / b.stats(0).throughput_bytes_per_s, 0.5, 0.06);
}

TEST(BalancerSplit, CancelledChunksFreeTheirSlotsWithoutAThroughputSample) {
  // Chunks of a request the peer refused are cancelled, not completed: completing them with no
  // duration would feed the lane a sample of bytes per microsecond and pull the split its way.
  Balancer b(config(), lanes(2));
  uint64_t now = 0;
  run(b, {10 * kGBps, 10 * kGBps}, 20, 4 << 20, &now);  // learn: both lanes measured alike
  const double before0 = b.stats(0).throughput_bytes_per_s, before1 = b.stats(1).throughput_bytes_per_s;
  std::vector<Chunk> chunks;
  ASSERT_EQ(b.plan({.tag = 99, .flow_id = 1, .bytes = 16 << 20}, now, chunks), PlanStatus::kOk);
  const size_t in_flight = b.in_flight();
  for (const Chunk& c : chunks) EXPECT_TRUE(b.cancel(c.id));
  EXPECT_EQ(b.in_flight(), in_flight - chunks.size());
  EXPECT_FALSE(b.cancel(chunks.front().id)) << "a chunk is freed once";
  EXPECT_EQ(b.stats(0).throughput_bytes_per_s, before0);
  EXPECT_EQ(b.stats(1).throughput_bytes_per_s, before1);
  EXPECT_NEAR(b.weight(0), 0.5, 0.05);
}

TEST(BalancerSplit, WeightsFollowAPathThatSlowsDown) {
  Balancer b(config(), lanes(2));
  uint64_t now = 0;
  run(b, {10 * kGBps, 10 * kGBps}, 50, 4 << 20, &now);
  run(b, {10 * kGBps, 5 * kGBps}, 30, 4 << 20, &now);  // the path changed: weights are re-learnt online
  auto carried = run(b, {10 * kGBps, 5 * kGBps}, 200, 4 << 20, &now);
  EXPECT_NEAR(share(carried, 1), 1.0 / 3, 0.03);
}

TEST(BalancerSplit, LaneSlowerThanAQuarterOfTheBestIsLeftOutButProbed) {
  BalancerConfig c = config();
  c.probe_every_chunks = 100;
  Balancer b(c, lanes(3));
  uint64_t now = 0;
  run(b, {10 * kGBps, 10 * kGBps, 2 * kGBps}, 20, 4 << 20, &now);
  auto carried = run(b, {10 * kGBps, 10 * kGBps, 2 * kGBps}, 200, 4 << 20, &now);
  EXPECT_EQ(b.weight(2), 0.0);
  EXPECT_LE(share(carried, 2), 1.0 / 100 + 0.002);  // only the probes
  EXPECT_GT(carried[2], 0u) << "a left-out lane must still be measured";
  EXPECT_GT(b.counters().probes, 0u);
  EXPECT_NEAR(share(carried, 0), 0.5, 0.03);
}

TEST(BalancerSplit, LaneJustAboveAQuarterStaysIn) {
  Balancer b(config(), lanes(2));
  uint64_t now = 0;
  run(b, {10 * kGBps, 3 * kGBps}, 20, 4 << 20, &now);
  auto carried = run(b, {10 * kGBps, 3 * kGBps}, 300, 4 << 20, &now);
  EXPECT_NEAR(share(carried, 1), 3.0 / 13, 0.03);
}

TEST(BalancerSplit, CongestionAwareMovesTrafficOffAPathWithManyCnps) {
  Balancer b(config(Policy::kCongestionAware), lanes(2));
  uint64_t now = 0;
  run(b, {10 * kGBps, 10 * kGBps}, 20, 4 << 20, &now);
  b.set_congestion(0, 5000, 0);  // 5000 CNP/s against a half-weight rate of 1000/s
  auto carried = run(b, {10 * kGBps, 10 * kGBps}, 300, 4 << 20, &now);
  EXPECT_LE(share(carried, 0), 0.30);
  // The same inputs under `weighted` do not move anything: CNPs are congestion_aware's input.
  Balancer w(config(Policy::kWeighted), lanes(2));
  w.set_congestion(0, 5000, 0);
  now = 0;
  carried = run(w, {10 * kGBps, 10 * kGBps}, 300, 4 << 20, &now);
  EXPECT_NEAR(share(carried, 0), 0.5, 0.05);
}

TEST(BalancerSplit, CongestionAwareFollowsTheDcqcnRate) {
  Balancer b(config(Policy::kCongestionAware), lanes(2));
  uint64_t now = 0;
  b.set_congestion(0, 0, 40'000);
  b.set_congestion(1, 0, 100'000);
  auto carried = run(b, {10 * kGBps, 10 * kGBps}, 300, 4 << 20, &now);
  EXPECT_NEAR(share(carried, 0), 0.4 / 1.4, 0.03);
  b.set_congestion(0, 0, 100'000);  // the reaction point recovered
  carried = run(b, {10 * kGBps, 10 * kGBps}, 300, 4 << 20, &now);
  EXPECT_NEAR(share(carried, 0), 0.5, 0.05);
}

TEST(BalancerSplit, RoundRobinTakesTurns) {
  Balancer b(config(Policy::kRoundRobin), lanes(3));
  std::vector<uint16_t> got;
  for (int i = 0; i < 7; ++i) got.push_back(b.pick(1, {}, 0));
  EXPECT_EQ(got, (std::vector<uint16_t>{0, 1, 2, 0, 1, 2, 0}));
  b.mark_down(1, 0, "port down");
  got.clear();
  for (int i = 0; i < 4; ++i) got.push_back(b.pick(1, {}, 0));
  EXPECT_EQ(got, (std::vector<uint16_t>{2, 0, 2, 0}));
}

TEST(BalancerSplit, PicksAreDeterministic) {
  Balancer a(config(), lanes(4));
  Balancer b(config(), lanes(4));
  uint64_t ta = 0, tb = 0;
  const std::vector<double> rates = {10 * kGBps, 7 * kGBps, 5 * kGBps, 9 * kGBps};
  run(a, rates, 20, 1 << 20, &ta);
  run(b, rates, 20, 1 << 20, &tb);
  for (int i = 0; i < 500; ++i) ASSERT_EQ(a.pick(3, {}, ta), b.pick(3, {}, tb)) << "pick " << i;
}

TEST(BalancerSplit, HashPinsAFlowToOneLane) {
  Balancer b(config(Policy::kHash), lanes(4));
  std::vector<uint16_t> first;
  std::array<int, 4> per_lane{};
  for (uint64_t f = 0; f < 1000; ++f) {
    first.push_back(b.pick(f, {}, 0));
    per_lane[first.back()]++;
  }
  for (int n : per_lane) EXPECT_GT(n, 150) << "flows spread over every lane";
  for (uint64_t f = 0; f < 1000; ++f) ASSERT_EQ(b.pick(f, {}, 0), first[f]);
  // Lane 2 down: only its flows move.
  b.mark_down(2, 0, "port down");
  for (uint64_t f = 0; f < 1000; ++f) {
    const uint16_t now_on = b.pick(f, {}, 1);
    if (first[f] == 2) {
      EXPECT_NE(now_on, 2);
    } else {
      EXPECT_EQ(now_on, first[f]) << "flow " << f << " moved though its lane is up";
    }
  }
  // Back after recovery: every flow returns to its lane.
  b.mark_recovered(2, 10);
  b.tick(10 + b.config().rejoin_backoff_min_us);
  for (uint64_t f = 0; f < 1000; ++f) ASSERT_EQ(b.pick(f, {}, 20 + b.config().rejoin_backoff_min_us), first[f]);
  // Independent of lane order: the salt comes from the NIC name.
  Balancer r(config(Policy::kHash), {{"nic3"}, {"nic2"}, {"nic1"}, {"nic0"}});
  for (uint64_t f = 0; f < 1000; ++f) ASSERT_EQ(r.pick(f, {}, 0), 3 - first[f]);
}

TEST(BalancerSplit, PrefersTheNearestNics) {
  const std::array<PciDistance, 3> d = {PciDistance::kCrossSocket, PciDistance::kSameSwitch, PciDistance::kSameSwitch};
  for (Policy p : {Policy::kWeighted, Policy::kRoundRobin, Policy::kHash}) {
    Balancer b(config(p), lanes(3));
    std::set<uint16_t> used;
    for (uint64_t i = 0; i < 200; ++i) used.insert(b.pick(i, d, 0));
    EXPECT_EQ(used, (std::set<uint16_t>{1, 2})) << to_string(p);
    b.mark_down(1, 0, "port down");
    b.mark_down(2, 0, "port down");
    EXPECT_EQ(b.pick(5, d, 0), 0) << "the far NIC is used when no near one is up";
  }
  const std::array<PciDistance, 3> host = {PciDistance::kHostBridge, PciDistance::kCrossSocket,
                                           PciDistance::kHostBridge};
  Balancer b(config(), lanes(3));
  std::set<uint16_t> used;
  for (uint64_t i = 0; i < 100; ++i) used.insert(b.pick(i, host, 0));
  EXPECT_EQ(used, (std::set<uint16_t>{0, 2}));

  BalancerConfig ignore = config();
  ignore.honour_pci_distance = false;
  Balancer all(ignore, lanes(3));
  used.clear();
  for (uint64_t i = 0; i < 100; ++i) used.insert(all.pick(i, d, 0));
  EXPECT_EQ(used, (std::set<uint16_t>{0, 1, 2}));
}

TEST(BalancerSplit, ChunksCoverTheMessageExactly) {
  BalancerConfig c = config();
  c.chunk_bytes = 1 << 20;
  Balancer b(c, lanes(2));
  std::vector<Chunk> out;
  ASSERT_EQ(b.plan({.tag = 9, .flow_id = 1, .bytes = (10u << 20) + 123}, 0, out), PlanStatus::kOk);
  ASSERT_EQ(out.size(), 11u);
  uint64_t next = 0;
  std::set<ChunkId> ids;
  for (const Chunk& ch : out) {
    EXPECT_EQ(ch.tag, 9u);
    EXPECT_EQ(ch.offset, next);
    next += ch.bytes;
    ids.insert(ch.id);
  }
  EXPECT_EQ(next, (10u << 20) + 123);
  EXPECT_EQ(out.back().bytes, 123u);
  EXPECT_EQ(ids.size(), out.size());
  EXPECT_EQ(b.in_flight(), 11u);
  out.clear();
  EXPECT_EQ(b.plan({.tag = 10, .flow_id = 1, .bytes = 0}, 0, out), PlanStatus::kOk);
  EXPECT_TRUE(out.empty());
}

TEST(BalancerSplit, FullInFlightTableIsBackPressure) {
  BalancerConfig c = config();
  c.max_in_flight_chunks = 8;
  Balancer b(c, lanes(2));
  std::vector<Chunk> out;
  ASSERT_EQ(b.plan({.tag = 1, .bytes = 6 * c.chunk_bytes}, 0, out), PlanStatus::kOk);
  EXPECT_EQ(b.plan({.tag = 2, .bytes = 3 * c.chunk_bytes}, 0, out), PlanStatus::kNoResource);
  EXPECT_EQ(out.size(), 6u) << "nothing planned on back-pressure";
  EXPECT_TRUE(b.complete(out[0].id, 10));
  EXPECT_FALSE(b.complete(out[0].id, 10)) << "a completed id is not completed twice";
  EXPECT_EQ(b.plan({.tag = 2, .bytes = 3 * c.chunk_bytes}, 0, out), PlanStatus::kOk);
}

TEST(BalancerSplit, PolicyNamesRoundTrip) {
  for (Policy p : {Policy::kWeighted, Policy::kCongestionAware, Policy::kRoundRobin, Policy::kHash}) {
    EXPECT_EQ(parse_policy(to_string(p)), p);
  }
  EXPECT_FALSE(parse_policy("random").has_value());
}

}  // namespace
}  // namespace rdmad::balancer::test
