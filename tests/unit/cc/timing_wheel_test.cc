#include "rdmad/cc/timing_wheel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace rdmad::cc {
namespace {

constexpr TimeNs kUs = 1000;

std::vector<uint64_t> cookies(const std::vector<TimerNode*>& v) {
  std::vector<uint64_t> out;
  for (const TimerNode* n : v) out.push_back(n->cookie);
  return out;
}

TEST(TimingWheel, HandsBackDueEntriesAtSlotGranularity) {
  TimingWheel w(kUs);
  TimerNode a, b, c;
  a.cookie = 1;
  b.cookie = 2;
  c.cookie = 3;
  w.insert(a, 5 * kUs + 500);
  w.insert(b, 3'000 * kUs);      // level 1
  w.insert(c, 2'000'000 * kUs);  // level 2
  EXPECT_EQ(w.size(), 3u);
  std::vector<TimerNode*> out;
  w.advance(5 * kUs + 999, out);
  EXPECT_TRUE(out.empty());  // never early, even inside the slot
  w.advance(6 * kUs, out);   // the slot boundary after 5.5 µs
  EXPECT_EQ(cookies(out), std::vector<uint64_t>{1});
  EXPECT_FALSE(TimingWheel::scheduled(a));
  out.clear();
  w.advance(1'999'999 * kUs, out);
  EXPECT_EQ(cookies(out), std::vector<uint64_t>{2});
  out.clear();
  EXPECT_EQ(w.next_expiry_hint_ns(), 2'000'000 * kUs);
  w.advance(3'000'000 * kUs, out);
  EXPECT_EQ(cookies(out), std::vector<uint64_t>{3});
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(w.next_expiry_hint_ns(), kNever);
}

TEST(TimingWheel, CancelAndReschedule) {
  TimingWheel w(kUs);
  TimerNode a, b;
  a.cookie = 1;
  b.cookie = 2;
  w.insert(a, 10 * kUs);
  w.insert(b, 10 * kUs);
  w.cancel(a);
  w.cancel(a);            // no-op
  w.insert(b, 20 * kUs);  // reschedule
  std::vector<TimerNode*> out;
  w.advance(15 * kUs, out);
  EXPECT_TRUE(out.empty());
  w.advance(20 * kUs, out);
  EXPECT_EQ(cookies(out), std::vector<uint64_t>{2});
}

TEST(TimingWheel, OverdueInsertComesBackOnNextAdvance) {
  TimingWheel w(kUs, 4, 100 * kUs);
  TimerNode a;
  w.insert(a, 3 * kUs);
  std::vector<TimerNode*> out;
  w.advance(100 * kUs, out);
  EXPECT_EQ(out.size(), 1u);
}

TEST(TimingWheel, BeyondHorizonIsNotLost) {
  TimingWheel w(kUs, 1);  // horizon kSlots µs
  EXPECT_EQ(w.horizon_ns(), TimingWheel::kSlots * kUs);
  TimerNode a, b;
  w.insert(a, 10'000 * kUs + 7);
  w.insert(b, 1'000 * kUs);
  std::vector<TimerNode*> out;
  w.advance(9'999 * kUs, out);
  EXPECT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], &b);
  out.clear();
  w.advance(10'000 * kUs, out);
  EXPECT_TRUE(out.empty());  // due 7 ns into the slot
  w.advance(10'001 * kUs, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], &a);
}

TEST(TimingWheel, CallbackMayCancelSiblingsOfTheSameSlot) {
  TimingWheel w(kUs);
  std::vector<TimerNode> nodes(4);
  for (auto& n : nodes) w.insert(n, 5 * kUs);
  int fired = 0;
  w.advance(20 * kUs, [&](TimerNode& n) {
    ++fired;
    for (auto& other : nodes) {
      if (&other != &n) w.cancel(other);
    }
  });
  EXPECT_EQ(fired, 1);
  EXPECT_TRUE(w.empty());
}

TEST(TimingWheel, CallbackMayRescheduleItsOwnEntry) {
  TimingWheel w(kUs);
  TimerNode n;
  w.insert(n, 5 * kUs);
  std::vector<TimeNs> fired;
  w.advance(40 * kUs, [&](TimerNode& e) {
    fired.push_back(e.due_ns);
    if (e.due_ns < 30 * kUs) w.insert(e, e.due_ns + 10 * kUs);  // periodic
  });
  EXPECT_EQ(fired, (std::vector<TimeNs>{5 * kUs, 15 * kUs, 25 * kUs, 35 * kUs}));
  EXPECT_TRUE(w.empty());
}

// Random inserts, cancels and advances against std::multimap, also with small wheels (1 level:
// horizon 1 ms at 1 µs; 2 levels: 1 s) so cascades and the overflow list are exercised.
TEST(TimingWheel, MatchesAReferenceContainer) {
  for (unsigned levels : {1u, 2u, 4u}) {
    std::mt19937_64 rng(levels);
    TimingWheel w(kUs, levels);
    constexpr size_t kNodes = 2000;
    std::vector<TimerNode> nodes(kNodes);
    std::multimap<TimeNs, uint64_t> ref;  // due time → cookie
    std::vector<std::multimap<TimeNs, uint64_t>::iterator> where(kNodes, ref.end());
    for (size_t i = 0; i < kNodes; ++i) nodes[i].cookie = i;
    TimeNs now = 0;
    TimeNs prev_now = 0;
    for (int op = 0; op < 100'000; ++op) {
      const uint64_t r = rng() % 100;
      const size_t i = rng() % kNodes;
      if (r < 50) {
        const uint64_t far = rng() % 100;
        const TimeNs delta = static_cast<TimeNs>(far < 70   ? rng() % (300 * kUs)
                                                 : far < 95 ? rng() % (100'000 * kUs)
                                                            : rng() % (20'000'000'000LL));
        const TimeNs due = now - 2 * kUs + delta;  // a few overdue
        if (where[i] != ref.end()) ref.erase(where[i]);
        w.insert(nodes[i], due);
        where[i] = ref.emplace(due, i);
      } else if (r < 65) {
        w.cancel(nodes[i]);
        if (where[i] != ref.end()) ref.erase(where[i]);
        where[i] = ref.end();
      } else {
        now += static_cast<TimeNs>(rng() % 100 < 90 ? rng() % (50 * kUs) : rng() % (200'000'000LL));
        std::vector<TimerNode*> out;
        TimeNs last_slot = -1;
        w.advance(now, [&](TimerNode& n) {
          const TimeNs slot = (n.due_ns + kUs - 1) / kUs;
          // Due-slot order (overdue entries come back in the cursor's slot).
          EXPECT_GE(std::max(slot, last_slot), last_slot);
          last_slot = std::max(slot, last_slot);
          out.push_back(&n);
        });
        std::multiset<uint64_t> got, want;
        for (TimerNode* n : out) got.insert(n->cookie);
        const auto end = ref.upper_bound(now / kUs * kUs);  // due ≤ now rounded down to a slot
        for (auto it = ref.begin(); it != end; ++it) {
          want.insert(it->second);
          where[it->second] = ref.end();
        }
        ref.erase(ref.begin(), end);
        ASSERT_EQ(got, want) << "levels " << levels << " op " << op << " now " << now << " cursor "
                             << w.cursor_ns() << " first due "
                             << (want.empty() ? -1 : nodes[*want.begin()].due_ns) << " previous advance "
                             << prev_now;
        prev_now = now;
      }
      ASSERT_EQ(w.size(), ref.size());
      if (op % 64 == 0) {
        ASSERT_EQ(w.misplaced_for_test(), 0u) << "levels " << levels << " op " << op;
      }
    }
  }
}

}  // namespace
}  // namespace rdmad::cc
