// Failover and rejoin: in-flight chunks are re-posted exactly once, events are reported once, the
// rejoin back-off follows a manual clock.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <utility>

#include "balancer_test_util.h"

namespace rdmad::balancer::test {
namespace {

BalancerConfig config() {
  BalancerConfig c;
  c.chunk_bytes = 4096;
  c.policy = Policy::kRoundRobin;
  c.rejoin_backoff_min_us = 100'000;
  c.rejoin_backoff_max_us = 1'000'000;
  c.rejoin_stable_us = 5'000'000;
  return c;
}

using Key = std::pair<uint64_t, uint64_t>;  // (tag, offset)

TEST(BalancerFailover, RepostsExactlyTheInFlightChunksNoneLostOrDuplicated) {
  Balancer b(config(), lanes(3));
  std::vector<Event> events;
  b.set_event_sink([&](const Event& e) { events.push_back(e); });
  std::vector<Chunk> chunks;
  for (uint64_t tag = 0; tag < 3; ++tag) {
    ASSERT_EQ(b.plan({.tag = tag, .flow_id = tag, .bytes = 64 * 4096 + 100}, 0, chunks), PlanStatus::kOk);
  }
  std::map<Key, int> completed;
  std::set<Key> in_flight_on_0;
  std::map<Key, ChunkId> live;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Chunk& c = chunks[i];
    if (i % 4 == 0) {  // some chunks of every lane already done
      ASSERT_TRUE(b.complete(c.id, 50));
      completed[{c.tag, c.offset}]++;
    } else {
      live[{c.tag, c.offset}] = c.id;
      if (c.nic == 0) in_flight_on_0.insert({c.tag, c.offset});
    }
  }
  ASSERT_FALSE(in_flight_on_0.empty());

  const auto moved = b.mark_down(0, 1000, "qp failure: retry exceeded");
  std::set<Key> moved_keys;
  for (const Chunk& c : moved) {
    EXPECT_NE(c.nic, 0);
    EXPECT_NE(c.nic, kNoNic);
    EXPECT_TRUE(moved_keys.insert({c.tag, c.offset}).second) << "moved twice";
    live[{c.tag, c.offset}] = c.id;  // the re-posted chunk has a new id
  }
  EXPECT_EQ(moved_keys, in_flight_on_0);
  for (size_t i = 1; i < moved.size(); ++i) {
    EXPECT_LT(Key(moved[i - 1].tag, moved[i - 1].offset), Key(moved[i].tag, moved[i].offset)) << "message order";
  }
  // A completion that was racing with the failure (old id) is not counted.
  for (const Chunk& c : chunks) {
    if (c.nic == 0 && in_flight_on_0.count({c.tag, c.offset})) {
      EXPECT_FALSE(b.complete(c.id, 50));
    }
  }
  for (const auto& [key, id] : live) {
    ASSERT_TRUE(b.complete(id, 50));
    completed[key]++;
  }
  EXPECT_EQ(b.in_flight(), 0u);
  // Every chunk of every message completed exactly once.
  EXPECT_EQ(completed.size(), chunks.size());
  for (const auto& [key, n] : completed) EXPECT_EQ(n, 1) << "tag " << key.first << " offset " << key.second;

  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, EventKind::kDown);
  EXPECT_EQ(events[0].nic, 0);
  EXPECT_EQ(events[0].chunks_moved, in_flight_on_0.size());
  EXPECT_EQ(events[0].reason, "qp failure: retry exceeded");
  EXPECT_TRUE(b.mark_down(0, 2000, "port down").empty());
  EXPECT_EQ(events.size(), 1u) << "a lane already down is reported once";
  EXPECT_EQ(b.counters().failovers, 1u);
  EXPECT_EQ(b.stats(0).failovers, 1u);
  EXPECT_EQ(b.stats(0).chunks_moved_away, in_flight_on_0.size());
  EXPECT_EQ(b.counters().chunks_reposted, in_flight_on_0.size());
}

TEST(BalancerFailover, WithNoLaneLeftChunksComeBackUnassigned) {
  Balancer b(config(), lanes(2));
  std::vector<Chunk> chunks;
  ASSERT_EQ(b.plan({.tag = 1, .bytes = 8 * 4096}, 0, chunks), PlanStatus::kOk);
  auto moved0 = b.mark_down(0, 10, "port down");
  EXPECT_EQ(moved0.size(), 4u);
  auto moved1 = b.mark_down(1, 20, "port down");
  EXPECT_EQ(moved1.size(), 8u) << "its own four and the four moved onto it";
  for (const Chunk& c : moved1) EXPECT_EQ(c.nic, kNoNic);
  EXPECT_EQ(b.in_flight(), 0u);
  std::vector<Chunk> more;
  EXPECT_EQ(b.plan({.tag = 2, .bytes = 1}, 30, more), PlanStatus::kNoLane);
  b.mark_recovered(1, 40);
  const uint64_t at = b.rejoin_at_us(1);
  ASSERT_EQ(at, 40u + 100'000);
  for (Chunk& c : moved1) EXPECT_FALSE(b.repost(c, at - 1));
  for (Chunk& c : moved1) {
    ASSERT_TRUE(b.repost(c, at));
    EXPECT_EQ(c.nic, 1);
  }
  EXPECT_EQ(b.in_flight(), 8u);
}

TEST(BalancerFailover, RejoinBackOffDoublesPerFailureAndResetsWhenStable) {
  Balancer b(config(), lanes(2));
  std::vector<Event> events;
  b.set_event_sink([&](const Event& e) { events.push_back(e); });
  uint64_t t = 1'000'000;
  auto expect_rejoin_after = [&](uint64_t recovered_at, uint64_t backoff) {
    b.mark_recovered(0, recovered_at);
    EXPECT_EQ(b.state(0), LaneState::kRecovering);
    EXPECT_EQ(b.rejoin_at_us(0), recovered_at + backoff);
    EXPECT_EQ(events.back().kind, EventKind::kRecovering);
    EXPECT_EQ(events.back().backoff_us, backoff);
    // Not picked during the back-off, picked from its end on.
    for (int i = 0; i < 4; ++i) EXPECT_EQ(b.pick(1, {}, recovered_at + backoff - 1), 1);
    EXPECT_EQ(b.state(0), LaneState::kRecovering);
    std::set<uint16_t> used;
    for (int i = 0; i < 4; ++i) used.insert(b.pick(1, {}, recovered_at + backoff));
    EXPECT_EQ(b.state(0), LaneState::kUp);
    EXPECT_EQ(used, (std::set<uint16_t>{0, 1}));
    EXPECT_EQ(events.back().kind, EventKind::kRejoined);
    EXPECT_EQ(events.back().at_us, recovered_at + backoff);
    return recovered_at + backoff;
  };
  b.mark_down(0, t, "port down");
  t = expect_rejoin_after(t + 5000, 100'000);
  b.mark_down(0, t + 10, "port down");  // flapping: the next wait doubles
  t = expect_rejoin_after(t + 20, 200'000);
  b.mark_down(0, t + 10, "port down");
  t = expect_rejoin_after(t + 20, 400'000);
  b.mark_down(0, t + 10, "port down");
  t = expect_rejoin_after(t + 20, 800'000);
  b.mark_down(0, t + 10, "port down");
  t = expect_rejoin_after(t + 20, 1'000'000);  // capped at the maximum
  // Down again while recovering: back to down, the wait keeps growing (capped).
  b.mark_down(0, t + 10, "port down");
  b.mark_recovered(0, t + 20);
  b.mark_down(0, t + 30, "qp failure");
  EXPECT_EQ(b.state(0), LaneState::kDown);
  t = expect_rejoin_after(t + 40, 1'000'000);
  // Stable for rejoin_stable_us: the next failure starts over at the minimum.
  b.mark_down(0, t + 5'000'000, "port down");
  expect_rejoin_after(t + 5'000'100, 100'000);

  int downs = 0, rejoins = 0;
  for (const Event& e : events) {
    downs += e.kind == EventKind::kDown;
    rejoins += e.kind == EventKind::kRejoined;
  }
  EXPECT_EQ(downs, 8);
  EXPECT_EQ(rejoins, 7);
  // The failure while recovering moved nothing: a failed rejoin, not a failover.
  EXPECT_EQ(b.counters().failovers, 7u);
  EXPECT_EQ(b.counters().rejoins_failed, 1u);
  EXPECT_EQ(b.stats(0).rejoins_failed, 1u);
  EXPECT_EQ(b.counters().rejoins, 7u);
  EXPECT_EQ(b.stats(0).rejoins, 7u);
}

TEST(BalancerFailover, RequestFaultIsNotAFailoverAndRejoinsWithoutBackOff) {
  Balancer b(config(), lanes(2));
  std::vector<Event> events;
  b.set_event_sink([&](const Event& e) { events.push_back(e); });
  uint64_t t = 1'000'000;
  // A path failure first, so the lane has earned a back-off of 200 ms for the next one.
  b.mark_down(0, t, "port down");
  b.mark_recovered(0, t + 10);
  b.tick(t + 10 + 100'000);
  ASSERT_EQ(b.state(0), LaneState::kUp);
  t += 200'000;
  // The peer refuses a request: the QP is rebuilt, the lane is back at the next tick.
  std::vector<Chunk> chunks;
  ASSERT_EQ(b.plan({.tag = 1, .flow_id = 1, .bytes = 8 * 4096}, t, chunks), PlanStatus::kOk);
  const std::vector<Chunk> moved = b.mark_down(0, t, "work request failed: remote access error",
                                               Balancer::Fault::kRequest);
  EXPECT_EQ(moved.size(), 4u) << "the lane's chunks still move to the other lane";
  EXPECT_EQ(b.state(0), LaneState::kDown);
  EXPECT_EQ(b.counters().failovers, 1u) << "a refused request is not a failover";
  EXPECT_EQ(b.stats(0).failovers, 1u);
  b.mark_recovered(0, t + 50);
  EXPECT_EQ(events.back().backoff_us, 0u);
  b.tick(t + 50);
  EXPECT_EQ(b.state(0), LaneState::kUp);
  // The back-off the path earned is still there for its next real failure.
  b.mark_down(0, t + 60, "port down");
  b.mark_recovered(0, t + 70);
  EXPECT_EQ(b.rejoin_at_us(0), t + 70 + 200'000);
  EXPECT_EQ(b.counters().failovers, 2u);
}

// check_path_before_rejoin: a lane whose back-off is over takes no chunk until its owner says its
// path works; a failed check is a failed rejoin (no failover), and the back-off keeps growing.
TEST(BalancerFailover, RecoveringLaneRejoinsOnlyAfterItsPathCheck) {
  BalancerConfig c = config();
  c.check_path_before_rejoin = true;
  Balancer b(c, lanes(2));
  uint64_t t = 1'000'000;
  b.mark_down(0, t, "qp failure: retry exceeded");
  b.mark_recovered(0, t + 10);
  EXPECT_TRUE(b.take_path_checks().empty()) << "asked for before the back-off is over";
  t += 10 + 100'000;
  for (int i = 0; i < 8; ++i) EXPECT_EQ(b.pick(1, {}, t), 1) << "a lane not checked yet took a chunk";
  EXPECT_EQ(b.state(0), LaneState::kRecovering);
  EXPECT_EQ(b.take_path_checks(), (std::vector<uint16_t>{0}));
  b.tick(t + 1);
  EXPECT_TRUE(b.take_path_checks().empty()) << "asked for twice in one recovery";

  // The check failed: down again, not a failover; the next back-off is twice as long.
  EXPECT_TRUE(b.mark_down(0, t + 2, "rejoin check failed: retry exceeded").empty());
  EXPECT_EQ(b.counters().failovers, 1u);
  EXPECT_EQ(b.counters().rejoins_failed, 1u);
  b.path_checked(0);  // late, for the recovery that failed: ignored
  b.mark_recovered(0, t + 3);
  EXPECT_EQ(b.rejoin_at_us(0), t + 3 + 200'000);
  t += 3 + 200'000;
  b.tick(t);
  EXPECT_EQ(b.state(0), LaneState::kRecovering);
  ASSERT_EQ(b.take_path_checks(), (std::vector<uint16_t>{0}));

  // The check passed: the lane rejoins and takes chunks.
  b.path_checked(0);
  std::set<uint16_t> used;
  for (int i = 0; i < 4; ++i) used.insert(b.pick(1, {}, t + 1));
  EXPECT_EQ(b.state(0), LaneState::kUp);
  EXPECT_EQ(used, (std::set<uint16_t>{0, 1}));
  EXPECT_EQ(b.counters().rejoins, 1u);

  // After a refused request the path is known to work: no check.
  b.mark_down(0, t + 10, "remote access error", Balancer::Fault::kRequest);
  b.mark_recovered(0, t + 20);
  b.tick(t + 20);
  EXPECT_EQ(b.state(0), LaneState::kUp);
  EXPECT_TRUE(b.take_path_checks().empty());
}

// check_first: a lane whose QPs just came up is checked before its first chunk. Meanwhile flows
// pinned to it wait (no spill), others use the lanes that are up; it joins without counting as a
// rejoin. A failed first check takes it down (no failover) and pinned flows then spill.
TEST(BalancerFailover, NewLaneIsCheckedBeforeItsFirstChunkAndPinnedFlowsWaitForIt) {
  BalancerConfig c = config();
  c.check_path_before_rejoin = true;
  Balancer b(c, lanes(2));
  const uint64_t t = 1'000'000;
  b.check_first(0, t);
  b.check_first(1, t);
  EXPECT_EQ(b.state(0), LaneState::kRecovering);
  EXPECT_EQ(b.pick(1, {}, t, 0b01), kNoNic) << "a flow pinned to a lane being checked waits for it";
  EXPECT_EQ(b.counters().spilled, 0u);
  EXPECT_EQ(b.take_path_checks(), (std::vector<uint16_t>{0, 1}));
  b.path_checked(1);
  EXPECT_EQ(b.pick(1, {}, t + 1), 1) << "an unpinned flow uses the lane already checked";
  EXPECT_EQ(b.pick(1, {}, t + 1, 0b01), kNoNic);
  // PCI distance: lane 0 is the nearer one; while it is checked, near flows wait for it too.
  const std::vector<PciDistance> near0 = {PciDistance::kSameSwitch, PciDistance::kCrossSocket};
  EXPECT_EQ(b.pick(1, near0, t + 1), kNoNic);
  b.path_checked(0);
  EXPECT_EQ(b.pick(1, {}, t + 2, 0b01), 0);
  EXPECT_EQ(b.pick(1, near0, t + 2), 0);
  EXPECT_EQ(b.state(0), LaneState::kUp);
  EXPECT_EQ(b.counters().rejoins, 0u) << "a first join is not a rejoin";
  EXPECT_EQ(b.counters().failovers, 0u);

  // Another balancer: lane 0's first check fails. Pinned flows spill; no failover.
  Balancer d(c, lanes(2));
  d.check_first(0, t);
  d.tick(t);
  ASSERT_EQ(d.take_path_checks(), (std::vector<uint16_t>{0}));
  d.mark_down(0, t + 1, "rejoin path check failed: transport retry counter exceeded");
  EXPECT_EQ(d.pick(1, {}, t + 2, 0b01), 1);
  EXPECT_EQ(d.counters().spilled, 1u);
  EXPECT_EQ(d.counters().failovers, 0u);
  EXPECT_EQ(d.counters().rejoins_failed, 1u);
  // Off unless the owner checks paths.
  Balancer e(config(), lanes(2));
  e.check_first(0, t);
  EXPECT_EQ(e.state(0), LaneState::kUp);
}

TEST(BalancerFailover, RejoinedLaneIsMeasuredAfresh) {
  BalancerConfig c = config();
  c.policy = Policy::kWeighted;
  Balancer b(c, lanes(2));
  uint64_t now = 0;
  run(b, {10e9, 5e9}, 30, 1 << 20, &now);
  b.mark_down(1, now, "port down");
  auto carried = run(b, {10e9, 5e9}, 10, 1 << 20, &now);
  EXPECT_EQ(carried[1], 0u);
  b.mark_recovered(1, now);
  now += c.rejoin_backoff_min_us;
  b.tick(now);
  EXPECT_NEAR(b.weight(1), 0.5, 1e-9) << "a rejoined lane starts at the mean of the measured ones";
  run(b, {10e9, 10e9}, 30, 1 << 20, &now);  // the path is faster than before it failed
  carried = run(b, {10e9, 10e9}, 200, 1 << 20, &now);
  EXPECT_NEAR(share(carried, 1), 0.5, 0.05);
}

}  // namespace
}  // namespace rdmad::balancer::test
