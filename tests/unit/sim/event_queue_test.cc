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

}  // namespace
}  // namespace rdmad::sim
