// Flows pinned to some lanes (a client's nic_mask): every policy chooses only among them while one
// is up; with all of them down the chunks spill over to the others, and come back on rejoin.
#include <gtest/gtest.h>

#include <set>

#include "balancer_test_util.h"

namespace rdmad::balancer::test {
namespace {

constexpr LaneMask bit(uint16_t lane) { return LaneMask{1} << lane; }

BalancerConfig config(Policy policy) {
  BalancerConfig c;
  c.chunk_bytes = 4096;
  c.policy = policy;
  c.rejoin_backoff_min_us = 100'000;
  c.rejoin_backoff_max_us = 1'000'000;
  return c;
}

// Plans `messages` messages of `chunks` chunks each for flow `flow_id` pinned to `lanes` and
// completes them at once; returns the chunks each lane got.
std::vector<uint64_t> send(Balancer& b, uint64_t flow_id, LaneMask lanes, int messages, uint64_t now_us,
                           uint64_t chunks = 8) {
  std::vector<uint64_t> per_lane(b.lane_count(), 0);
  std::vector<Chunk> out;
  for (int m = 0; m < messages; ++m) {
    out.clear();
    const Message msg{.tag = static_cast<uint64_t>(m), .flow_id = flow_id, .bytes = chunks * 4096, .lanes = lanes};
    EXPECT_EQ(b.plan(msg, now_us, out), PlanStatus::kOk);
    for (const Chunk& c : out) {
      EXPECT_EQ(c.lanes, lanes);
      per_lane[c.nic]++;
      b.complete(c.id, 10 + c.nic);  // lanes of slightly different speeds: the weights differ
    }
  }
  return per_lane;
}

class PinnedPolicy : public ::testing::TestWithParam<Policy> {};

TEST_P(PinnedPolicy, ChunksGoOnlyToTheMaskedLanes) {
  Balancer b(config(GetParam()), lanes(4));
  const auto got = send(b, 7, bit(1) | bit(3), 200, 0);
  EXPECT_EQ(got[0], 0u);
  EXPECT_EQ(got[2], 0u);
  EXPECT_GT(got[1] + got[3], 0u);
  if (GetParam() != Policy::kHash) {  // the others stripe over both masked lanes
    EXPECT_GT(got[1], 0u);
    EXPECT_GT(got[3], 0u);
  }
  EXPECT_EQ(b.counters().spilled, 0u);
  // An unpinned flow on the same balancer still uses every lane (round robin and weighted).
  const auto all = send(b, 8, kEveryLane, 200, 0);
  if (GetParam() != Policy::kHash) {
    for (uint16_t i = 0; i < 4; ++i) EXPECT_GT(all[i], 0u) << "lane " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, PinnedPolicy,
                         ::testing::Values(Policy::kWeighted, Policy::kCongestionAware, Policy::kRoundRobin,
                                           Policy::kHash),
                         [](const ::testing::TestParamInfo<Policy>& p) { return std::string(to_string(p.param)); });

TEST(BalancerPinned, AllMaskedLanesDownSpillsToTheOthersAndRejoinBringsItBack) {
  Balancer b(config(Policy::kRoundRobin), lanes(3));
  std::vector<Chunk> in_flight;
  ASSERT_EQ(b.plan({.tag = 1, .flow_id = 9, .bytes = 6 * 4096, .lanes = bit(1)}, 0, in_flight), PlanStatus::kOk);
  for (const Chunk& c : in_flight) ASSERT_EQ(c.nic, 1);

  // Its only lane fails: the chunks in flight move to the other lanes, keeping their mask.
  const auto moved = b.mark_down(1, 1000, "port down");
  ASSERT_EQ(moved.size(), in_flight.size());
  std::set<uint16_t> used;
  for (const Chunk& c : moved) {
    EXPECT_NE(c.nic, 1);
    EXPECT_NE(c.nic, kNoNic);
    EXPECT_EQ(c.lanes, bit(1));
    used.insert(c.nic);
  }
  EXPECT_EQ(used, (std::set<uint16_t>{0, 2}));  // round robin over what is left
  EXPECT_EQ(b.counters().spilled, moved.size());
  for (const Chunk& c : moved) ASSERT_TRUE(b.complete(c.id, 10));

  // New chunks spill too while it is down (or recovering), striped by the policy.
  auto got = send(b, 9, bit(1), 10, 2000);
  EXPECT_EQ(got[1], 0u);
  EXPECT_GT(got[0], 0u);
  EXPECT_GT(got[2], 0u);
  b.mark_recovered(1, 3000);
  got = send(b, 9, bit(1), 10, 3000 + 50'000);
  EXPECT_EQ(got[1], 0u) << "still in its back-off";

  // Rejoined: back on its own lane only.
  const uint64_t spilled = b.counters().spilled;
  got = send(b, 9, bit(1), 10, 3000 + 100'000);
  EXPECT_EQ(b.state(1), LaneState::kUp);
  EXPECT_EQ(got[0], 0u);
  EXPECT_EQ(got[2], 0u);
  EXPECT_EQ(got[1], 80u);
  EXPECT_EQ(b.counters().spilled, spilled);
}

TEST(BalancerPinned, OneMaskedLaneDownKeepsTheFlowOnTheOthersOfItsMask) {
  Balancer b(config(Policy::kWeighted), lanes(4));
  b.mark_down(2, 0, "port down");
  const auto got = send(b, 5, bit(2) | bit(3), 50, 10);
  EXPECT_EQ(got[0] + got[1] + got[2], 0u);
  EXPECT_EQ(got[3], 400u);
  EXPECT_EQ(b.counters().spilled, 0u);
}

TEST(BalancerPinned, ANearerLaneOutsideTheMaskIsNotUsedTheNearestInsideIs) {
  BalancerConfig cfg = config(Policy::kRoundRobin);
  cfg.honour_pci_distance = true;
  Balancer b(cfg, lanes(4));
  const std::vector<PciDistance> distance{PciDistance::kSameSwitch, PciDistance::kSameSwitch, PciDistance::kHostBridge,
                                          PciDistance::kCrossSocket};
  std::vector<Chunk> out;
  ASSERT_EQ(b.plan({.tag = 1, .flow_id = 3, .bytes = 16 * 4096, .distance = distance, .lanes = bit(2) | bit(3)}, 0, out),
            PlanStatus::kOk);
  for (const Chunk& c : out) EXPECT_EQ(c.nic, 2);
}

TEST(BalancerPinned, AMaskOfLanesThatDoNotExistSpillsLikeOneWhoseLanesAreDown) {
  Balancer b(config(Policy::kRoundRobin), lanes(2));
  const auto got = send(b, 1, bit(5), 4, 0);
  EXPECT_EQ(got[0] + got[1], 32u);
  EXPECT_EQ(b.counters().spilled, 32u);
}

}  // namespace
}  // namespace rdmad::balancer::test
