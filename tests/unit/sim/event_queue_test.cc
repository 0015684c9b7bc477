#include "rdmad/sim/event_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "rdmad/sim/rng.h"

namespace rdmad::sim {
namespace {

TEST(EventQueueTest, PopsInTimeOrderAndTiesInInsertionOrder) {
  EventQueue q;
  q.push(30, EventKind::kSample, 1);
  q.push(10, EventKind::kSample, 2);
  q.push(10, EventKind::kSample, 3);
  q.push(20, EventKind::kSample, 4);
  q.push(10, EventKind::kSample, 5);
  std::vector<uint32_t> order;
  while (!q.empty()) order.push_back(q.pop().a);
  EXPECT_EQ(order, (std::vector<uint32_t>{2, 3, 5, 4, 1}));
}

// Interleaved pushes and pops against a sorted reference of (time, sequence).
TEST(EventQueueTest, MatchesReferenceOnRandomInterleavings) {
  Rng rng(42);
  EventQueue q;
  std::vector<std::tuple<SimTimeNs, uint64_t, uint32_t>> ref;
  uint64_t seq = 0;
  SimTimeNs now = 0;
  for (int step = 0; step < 200000; ++step) {
    if (ref.empty() || rng.below(3) != 0) {
      SimTimeNs t = now + rng.below(1000);
      q.push(t, EventKind::kArrive, static_cast<uint32_t>(step));
      ref.emplace_back(t, seq++, static_cast<uint32_t>(step));
    } else {
      auto it = std::min_element(ref.begin(), ref.end());
      Event ev = q.pop();
      ASSERT_EQ(ev.time_ns, std::get<0>(*it));
      ASSERT_EQ(ev.a, std::get<2>(*it));
      now = ev.time_ns;
      ref.erase(it);
    }
    ASSERT_EQ(q.size(), ref.size());
  }
}

// Equal times keep their scheduling order whichever way they reach the front: pushed at the current
// time, or spread down from a higher bucket after later times were popped.
TEST(EventQueueTest, EqualTimesKeepSchedulingOrderAcrossRefills) {
  EventQueue q;
  q.push(1000, EventKind::kArrive, 1);  // far bucket
  q.push(5, EventKind::kArrive, 2);
  q.push(1000, EventKind::kArrive, 3);
  EXPECT_EQ(q.pop().a, 2u);
  q.push(5, EventKind::kArrive, 4);  // at the current time: after nothing else at 5
  q.push(1000, EventKind::kArrive, 5);
  q.push(6, EventKind::kArrive, 6);
  std::vector<uint32_t> order;
  while (!q.empty()) order.push_back(q.pop().a);
  EXPECT_EQ(order, (std::vector<uint32_t>{4, 6, 1, 3, 5}));
}

// The queue is monotone: an event before the latest popped time is a bug of the caller.
TEST(EventQueueDeathTest, SchedulingIntoThePastIsABug) {
  EventQueue q;
  q.push(100, EventKind::kArrive, 1);
  EXPECT_EQ(q.pop().time_ns, 100);
  EXPECT_DEATH(q.push(99, EventKind::kArrive, 2), "before the current time 100 ns");
}

}  // namespace
}  // namespace rdmad::sim
