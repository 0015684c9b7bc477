#include "rdmad/cc/timing_wheel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

namespace rdmad::cc {
namespace {

constexpr TimeNs kUs = 1000;

using Ids = std::vector<TimerId>;

TEST(TimingWheel, HandsBackDueEntriesAtSlotGranularity) {
  TimingWheel w(kUs, 3);
  w.insert(0, 5 * kUs + 500);
  w.insert(1, 3'000 * kUs);      // level 1
  w.insert(2, 2'000'000 * kUs);  // level 2
  EXPECT_EQ(w.size(), 3u);
  Ids out;
  w.advance(5 * kUs + 999, out);
  EXPECT_TRUE(out.empty());  // never early, even inside the slot
  w.advance(6 * kUs, out);   // the slot boundary after 5.5 µs
  EXPECT_EQ(out, Ids{0});
  EXPECT_FALSE(w.scheduled(0));
  EXPECT_TRUE(w.scheduled(1));
  out.clear();
  w.advance(1'999'999 * kUs, out);
  EXPECT_EQ(out, Ids{1});
  out.clear();
  EXPECT_EQ(w.next_expiry_hint_ns(), 2'000'000 * kUs);
  w.advance(3'000'000 * kUs, out);
  EXPECT_EQ(out, Ids{2});
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(w.next_expiry_hint_ns(), kNever);
}

TEST(TimingWheel, CallbackGetsTheExactDueTime) {
  TimingWheel w(kUs, 2);
  w.insert(0, 7 * kUs + 1);
  w.insert(1, 5'000 * kUs + 3);  // cascades once
  std::vector<std::pair<TimerId, TimeNs>> got;
  w.advance(6'000 * kUs, [&](TimerId id, TimeNs due) { got.emplace_back(id, due); });
  EXPECT_EQ(got, (std::vector<std::pair<TimerId, TimeNs>>{{0, 7 * kUs + 1}, {1, 5'000 * kUs + 3}}));
}

TEST(TimingWheel, CancelAndReschedule) {
  TimingWheel w(kUs, 2);
  w.insert(0, 10 * kUs);
  w.insert(1, 10 * kUs);
  w.cancel(0);
  w.cancel(0);            // no-op
  w.insert(1, 20 * kUs);  // reschedule
  EXPECT_EQ(w.size(), 1u);
  EXPECT_EQ(w.stale_entries(), 2u);
  Ids out;
  w.advance(15 * kUs, out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(w.stale_entries(), 0u);  // both dropped at their slot
  w.advance(20 * kUs, out);
  EXPECT_EQ(out, Ids{1});
  EXPECT_EQ(w.misplaced_for_test(), 0u);
}

// A caller sleeps until the hint: a timer cancelled or pushed back must not wake it at the old time.
// The hint skips (and drops) the stale entries, at level 0 and above.
TEST(TimingWheel, HintSkipsCancelledAndRescheduledTimers) {
  TimingWheel w(kUs, 3, 4, kUs);  // cursor at tick 1: no cascade owed at 0
  w.insert(0, 10 * kUs);
  w.insert(1, 20 * kUs);
  EXPECT_EQ(w.next_expiry_hint_ns(), 10 * kUs);
  w.insert(0, 500 * kUs);  // re-armed later
  EXPECT_EQ(w.next_expiry_hint_ns(), 20 * kUs);
  w.cancel(1);
  EXPECT_EQ(w.next_expiry_hint_ns(), 500 * kUs);
  EXPECT_EQ(w.stale_entries(), 0u);  // the two walked past are gone
  EXPECT_EQ(w.misplaced_for_test(), 0u);
  w.insert(1, 3'000 * kUs);      // level 1, slot 2
  w.insert(2, 2'000'000 * kUs);  // level 2, slot 1
  w.cancel(0);
  EXPECT_EQ(w.next_expiry_hint_ns(), 2'048 * kUs);  // the level-1 slot's start
  w.cancel(1);
  EXPECT_EQ(w.next_expiry_hint_ns(), 1'048'576 * kUs);  // the level-2 slot's start
  EXPECT_EQ(w.stale_entries(), 0u);
  EXPECT_EQ(w.misplaced_for_test(), 0u);
  Ids out;
  w.advance(2'000'000 * kUs, out);
  EXPECT_EQ(out, Ids{2});
}

TEST(TimingWheel, RescheduleEarlierAndBackToTheSameTime) {
  TimingWheel w(kUs, 1);
  w.insert(0, 50 * kUs);
  w.insert(0, 10 * kUs);
  w.insert(0, 50 * kUs);  // a stale entry sits in the same slot as the live one
  Ids out;
  w.advance(49 * kUs, out);
  EXPECT_TRUE(out.empty());
  w.advance(60 * kUs, out);
  EXPECT_EQ(out, Ids{0});  // once
  EXPECT_EQ(w.stale_entries(), 0u);
}

TEST(TimingWheel, OverdueInsertComesBackOnNextAdvance) {
  TimingWheel w(kUs, 1, 4, 100 * kUs);
  w.insert(0, 3 * kUs);
  Ids out;
  w.advance(100 * kUs, out);
  EXPECT_EQ(out, Ids{0});
}

TEST(TimingWheel, BeyondHorizonIsNotLost) {
  TimingWheel w(kUs, 2, 1);  // horizon kSlots µs
  EXPECT_EQ(w.horizon_ns(), TimingWheel::kSlots * kUs);
  w.insert(0, 10'000 * kUs + 7);
  w.insert(1, 1'000 * kUs);
  Ids out;
  w.advance(9'999 * kUs, out);
  EXPECT_EQ(out, Ids{1});
  out.clear();
  w.advance(10'000 * kUs, out);
  EXPECT_TRUE(out.empty());  // due 7 ns into the slot
  w.advance(10'001 * kUs, out);
  EXPECT_EQ(out, Ids{0});
}

// An entry several horizons out is re-placed at every horizon boundary until it fits; cancelling
// it while it waits in the overflow list, or rescheduling it from there into the wheel, works.
TEST(TimingWheel, OverflowEntriesAreReinsertedAtEachHorizonBoundary) {
  TimingWheel w(kUs, 3, 1);
  w.insert(0, 5'000 * kUs);  // 4 horizons out
  w.insert(1, 3'000 * kUs);
  w.insert(2, 4'000 * kUs);
  w.cancel(1);
  Ids out;
  for (TimeNs t = 0; t <= 2'560 * kUs; t += 512 * kUs) {
    w.advance(t, out);
    ASSERT_EQ(w.misplaced_for_test(), 0u) << t;
  }
  w.insert(2, 4'999 * kUs + 1);  // rescheduled while in the overflow list, into it again
  for (TimeNs t = 3'000 * kUs; t <= 4'999 * kUs; t += 100 * kUs) {
    w.advance(t, out);
    ASSERT_EQ(w.misplaced_for_test(), 0u) << t;
  }
  EXPECT_TRUE(out.empty());
  w.advance(5'000 * kUs, out);
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, (Ids{0, 2}));
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(w.stale_entries(), 0u);
}

// Slots on both sides of every bitmap word boundary, and the last slot of each level.
TEST(TimingWheel, BitmapWordBoundaries) {
  for (const TimeNs slot : {0, 1, 62, 63, 64, 65, 127, 128, 511, 512, 1022, 1023}) {
    TimingWheel w(kUs, 3, 2, kUs);  // cursor at tick 1
    const TimeNs at0 = std::max<TimeNs>(slot, 1);
    w.insert(0, at0 * kUs);                   // level 0
    w.insert(1, (slot + 1) * 1024 * kUs);     // level 1, slot + 1 (never the cursor's own)
    w.insert(2, (slot * 1024 + 1023) * kUs);  // level 1 slot `slot` (level 0 for slot 0), last tick
    ASSERT_EQ(w.misplaced_for_test(), 0u) << slot;
    EXPECT_EQ(w.next_expiry_hint_ns(), at0 * kUs) << slot;
    Ids out;
    w.advance(at0 * kUs, out);
    EXPECT_EQ(out, Ids{0}) << slot;
    out.clear();
    w.advance((slot * 1024 + 1022) * kUs, out);
    EXPECT_TRUE(out.empty()) << slot;
    w.advance((slot * 1024 + 1023) * kUs, out);
    EXPECT_EQ(out, Ids{2}) << slot;
    w.advance((slot + 1) * 1024 * kUs - 1, out);
    EXPECT_EQ(out, Ids{2}) << slot;
    w.advance((slot + 1) * 1024 * kUs, out);
    EXPECT_EQ(out, (Ids{2, 1})) << slot;
    EXPECT_TRUE(w.empty());
    EXPECT_EQ(w.misplaced_for_test(), 0u) << slot;
  }
}

// Entries on the exact tick where a level's block starts are due at a cascade point; advancing to
// the boundary, one tick short of it, and past it in one go must all hand them back on time.
TEST(TimingWheel, CascadeBoundaries) {
  for (const TimeNs boundary : {TimeNs{1024}, TimeNs{1024} * 1024, TimeNs{1024} * 1024 * 1024}) {
    for (const TimeNs step : {TimeNs{1}, boundary - 1, boundary, boundary + 1}) {
      TimingWheel w(1, 4, 4);  // 1 ns slots: ticks are ns
      w.insert(0, boundary);
      w.insert(1, boundary - 1);
      w.insert(2, boundary + 1);
      w.insert(3, 2 * boundary);
      std::vector<std::pair<TimerId, TimeNs>> got;
      const auto record = [&](TimerId id, TimeNs) { got.emplace_back(id, w.cursor_ns()); };
      TimeNs now = 0;
      while (!w.empty()) {
        // Jump straight to the next hint when stepping finely would take too long.
        now = step == 1 ? std::max(now + 1, w.next_expiry_hint_ns()) : now + step;
        w.advance(now, record);
        ASSERT_EQ(w.misplaced_for_test(), 0u) << boundary << " " << step << " " << now;
        for (const auto& [id, cursor] : got) ASSERT_LE(cursor, now + 1);
      }
      ASSERT_EQ(got.size(), 4u);
      EXPECT_EQ(got[0].first, 1u);
      EXPECT_EQ(got[1].first, 0u);
      EXPECT_EQ(got[2].first, 2u);
      EXPECT_EQ(got[3].first, 3u);
    }
  }
}

// Cancelling an entry after it has cascaded (and after it cascaded twice) leaves a stale entry in
// its new slot only; it never fires and is dropped there.
TEST(TimingWheel, CancelOfACascadedEntry) {
  TimingWheel w(kUs, 3);
  w.insert(0, 1'500'000 * kUs);  // level 2
  w.insert(1, 1'500'000 * kUs);
  w.insert(2, 2'000 * kUs);  // level 1
  w.insert(2 + 0, 2'000 * kUs);
  Ids out;
  w.advance(1'048'576 * kUs, out);  // 0 and 1 cascade to level 1
  w.advance(1'499'136 * kUs, out);  // ... and to level 0
  EXPECT_EQ(out, Ids{2});
  out.clear();
  ASSERT_EQ(w.misplaced_for_test(), 0u);
  w.cancel(0);
  EXPECT_EQ(w.stale_entries(), 1u);
  EXPECT_EQ(w.size(), 1u);
  w.advance(1'500'000 * kUs, out);
  EXPECT_EQ(out, Ids{1});
  EXPECT_EQ(w.stale_entries(), 0u);
  EXPECT_FALSE(w.scheduled(0));
}

// Rescheduling one timer over and over far ahead leaves stale entries; they are swept once they
// outnumber live entries by the slack, so memory stays bounded, and the live timers are intact.
TEST(TimingWheel, StaleEntriesAreSweptWhenTheyPileUp) {
  TimingWheel w(kUs, 100);
  for (TimerId id = 1; id < 100; ++id) w.insert(id, 900'000 * kUs + id);
  size_t most_stale = 0;
  for (int i = 0; i < 100'000; ++i) {
    w.insert(0, (500'000 + i) * kUs);  // a keepalive pushed back on every packet
    most_stale = std::max(most_stale, w.stale_entries());
  }
  EXPECT_LE(most_stale, 99 + 1 + 4096u);
  EXPECT_GT(most_stale, 4000u);
  EXPECT_EQ(w.misplaced_for_test(), 0u);
  Ids out;
  w.advance(1'000'000 * kUs, out);
  ASSERT_EQ(out.size(), 100u);
  EXPECT_EQ(out[0], 0u);
  EXPECT_EQ(w.stale_entries(), 0u);
}

// Callbacks that pile up stale entries past the sweep threshold in the middle of a batch: the sweep
// waits for advance() to finish, so the batch being handed back is not disturbed.
TEST(TimingWheel, SweepIsDeferredWhileHandingBack) {
  constexpr TimerId kTimers = 10'000;
  TimingWheel w(kUs, kTimers);
  for (TimerId id = 0; id < kTimers; ++id) w.insert(id, 5 * kUs);
  std::vector<int> fired(kTimers, 0);
  size_t most_stale = 0;
  w.advance(5 * kUs, [&](TimerId id, TimeNs) {
    ++fired[id];
    most_stale = std::max(most_stale, w.stale_entries());
    // Push every later odd timer around (leaving stale entries in this very batch), then back.
    if (id % 2 == 0 && id + 1 < kTimers) {
      w.insert(id + 1, 900 * kUs);
      w.insert(id + 1, 800 * kUs);
      w.insert(id + 1, 5 * kUs);  // behind the cursor now: ready for the next advance
    }
  });
  EXPECT_GT(most_stale, w.size() + 4096);  // past the threshold inside the batch ...
  EXPECT_EQ(w.stale_entries(), 0u);        // ... and swept once it was over
  for (TimerId id = 0; id < kTimers; ++id) ASSERT_EQ(fired[id], id % 2 == 0 ? 1 : 0) << id;
  EXPECT_EQ(w.size(), kTimers / 2);
  EXPECT_EQ(w.misplaced_for_test(), 0u);
  w.advance(6 * kUs, [&](TimerId id, TimeNs) { ++fired[id]; });
  for (TimerId id = 0; id < kTimers; ++id) ASSERT_EQ(fired[id], 1) << id;
  EXPECT_TRUE(w.empty());
  w.advance(1'000 * kUs, [&](TimerId id, TimeNs) { ++fired[id]; });
  EXPECT_EQ(w.stale_entries(), 0u);
  for (TimerId id = 0; id < kTimers; ++id) ASSERT_EQ(fired[id], 1) << id;
}

TEST(TimingWheel, GrowAddsUnscheduledTimers) {
  TimingWheel w(kUs, 1);
  w.insert(0, 5 * kUs);
  w.grow(3);
  EXPECT_EQ(w.timer_count(), 3u);
  EXPECT_TRUE(w.scheduled(0));
  EXPECT_FALSE(w.scheduled(2));
  w.insert(2, 4 * kUs);
  Ids out;
  w.advance(5 * kUs, out);
  EXPECT_EQ(out, (Ids{2, 0}));
  EXPECT_THROW(w.grow(TimingWheel::kMaxTimers + 1), std::invalid_argument);
}

TEST(TimingWheel, CallbackMayCancelSiblingsOfTheSameSlot) {
  TimingWheel w(kUs, 4);
  for (TimerId id = 0; id < 4; ++id) w.insert(id, 5 * kUs);
  int fired = 0;
  w.advance(20 * kUs, [&](TimerId got, TimeNs) {
    ++fired;
    for (TimerId other = 0; other < 4; ++other) {
      if (other != got) w.cancel(other);
    }
  });
  EXPECT_EQ(fired, 1);
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(w.stale_entries(), 0u);
}

TEST(TimingWheel, CallbackMayRescheduleItsOwnEntry) {
  TimingWheel w(kUs, 1);
  w.insert(0, 5 * kUs);
  std::vector<TimeNs> fired;
  w.advance(40 * kUs, [&](TimerId id, TimeNs due) {
    fired.push_back(due);
    if (due < 30 * kUs) w.insert(id, due + 10 * kUs);  // periodic
  });
  EXPECT_EQ(fired, (std::vector<TimeNs>{5 * kUs, 15 * kUs, 25 * kUs, 35 * kUs}));
  EXPECT_TRUE(w.empty());
}

// Random inserts, cancels and advances against std::multimap, also with small wheels (1 level:
// horizon 1 ms at 1 µs; 2 levels: 1 s) so cascades and the overflow list are exercised.
TEST(TimingWheel, MatchesAReferenceContainer) {
  for (unsigned levels : {1u, 2u, 4u}) {
    std::mt19937_64 rng(levels);
    constexpr uint32_t kNodes = 2000;
    TimingWheel w(kUs, kNodes, levels);
    std::multimap<TimeNs, TimerId> ref;  // due time → timer
    std::vector<std::multimap<TimeNs, TimerId>::iterator> where(kNodes, ref.end());
    TimeNs now = 0;
    TimeNs prev_now = 0;
    for (int op = 0; op < 100'000; ++op) {
      const uint64_t r = rng() % 100;
      const auto i = static_cast<TimerId>(rng() % kNodes);
      if (r < 50) {
        const uint64_t far = rng() % 100;
        const TimeNs delta = static_cast<TimeNs>(far < 70   ? rng() % (300 * kUs)
                                                 : far < 95 ? rng() % (100'000 * kUs)
                                                            : rng() % (20'000'000'000LL));
        const TimeNs due = now - 2 * kUs + delta;  // a few overdue
        if (where[i] != ref.end()) ref.erase(where[i]);
        w.insert(i, due);
        where[i] = ref.emplace(due, i);
      } else if (r < 65) {
        w.cancel(i);
        if (where[i] != ref.end()) ref.erase(where[i]);
        where[i] = ref.end();
      } else {
        now += static_cast<TimeNs>(rng() % 100 < 90 ? rng() % (50 * kUs) : rng() % (200'000'000LL));
        std::vector<TimerId> out;
        TimeNs last_slot = -1;
        w.advance(now, [&](TimerId id, TimeNs due) {
          EXPECT_EQ(due, where[id] == ref.end() ? -1 : where[id]->first);
          const TimeNs slot = (due + kUs - 1) / kUs;
          // Due-slot order (overdue entries come back in the cursor's slot).
          EXPECT_GE(std::max(slot, last_slot), last_slot);
          last_slot = std::max(slot, last_slot);
          out.push_back(id);
        });
        std::multiset<TimerId> got(out.begin(), out.end());
        std::multiset<TimerId> want;
        const auto end = ref.upper_bound(now / kUs * kUs);  // due ≤ now rounded down to a slot
        const TimeNs first_due = end == ref.begin() ? -1 : ref.begin()->first;
        for (auto it = ref.begin(); it != end; ++it) {
          want.insert(it->second);
          where[it->second] = ref.end();
        }
        ref.erase(ref.begin(), end);
        ASSERT_EQ(got, want) << "levels " << levels << " op " << op << " now " << now << " cursor "
                             << w.cursor_ns() << " first due " << first_due << " previous advance "
                             << prev_now;
        prev_now = now;
      }
      ASSERT_EQ(w.size(), ref.size());
      if (op % 4 == 0) {
        // The hint never passes the earliest live due slot (or the cursor, for an overdue one) and
        // is that slot when it lies in the cursor's level-0 block, whatever went stale.
        const TimeNs hint = w.next_expiry_hint_ns();
        if (ref.empty()) {
          ASSERT_EQ(hint, kNever) << "levels " << levels << " op " << op;
        } else {
          const TimeNs cursor = w.cursor_ns();
          const TimeNs due_slot = std::max(cursor, (ref.begin()->first + kUs - 1) / kUs * kUs);
          ASSERT_LE(hint, due_slot) << "levels " << levels << " op " << op;
          ASSERT_GE(hint, cursor) << "levels " << levels << " op " << op;
          const TimeNs block = TimeNs{TimingWheel::kSlots} * kUs;
          if (cursor % block != 0 && due_slot / block == cursor / block) {
            ASSERT_EQ(hint, due_slot) << "levels " << levels << " op " << op;
          }
        }
      }
      if (op % 64 == 0) {
        ASSERT_EQ(w.misplaced_for_test(), 0u) << "levels " << levels << " op " << op;
      }
    }
  }
}

}  // namespace
}  // namespace rdmad::cc

namespace rdmad::cc {
namespace {

// The engine's wheel at its largest: 65,536 QPs × 4 timers each (retransmit, send, reaction,
// notification), 300 QPs with a retransmit timeout and a pacing departure scheduled, driven by a
// manual clock 1 µs at a time as a datapath's passes would. Every timer fires once, never early and
// less than a slot late; the wheel's hint (how long a datapath may sleep) is never past the slot
// boundary at which the earliest timer falls due; nothing fires for the 65,236 idle QPs.
TEST(TimingWheel, EngineScaleTimersFireOnTimeAmongSixtyFourThousandQps) {
  constexpr uint32_t kQps = 65536, kTimersPerQp = 4, kActive = 300;
  TimingWheel w(kUs, kQps * kTimersPerQp, TimingWheel::kMaxLevels, 0);
  std::mt19937 rng(2026);
  std::map<TimerId, TimeNs> due;
  std::set<uint32_t> qps;
  while (qps.size() < kActive) qps.insert(rng() % kQps);
  for (uint32_t qp : qps) {
    const TimerId retransmit = qp * kTimersPerQp + 0, send = qp * kTimersPerQp + 1;
    due[retransmit] = kUs * 1000 + static_cast<TimeNs>(rng() % (69'000 * kUs));  // 1..70 ms
    due[send] = 1 + static_cast<TimeNs>(rng() % (1000 * kUs));                    // up to 1 ms
    w.insert(retransmit, due[retransmit]);
    w.insert(send, due[send]);
  }
  std::map<TimerId, TimeNs> fired;
  std::multiset<TimeNs> pending;
  for (const auto& [id, at] : due) pending.insert(at);
  for (TimeNs now = kUs; now <= 100'000 * kUs; now += kUs) {
    const TimeNs earliest = pending.empty() ? kNever : *pending.begin();
    if (now % (97 * kUs) == 0 && earliest != kNever) {  // now and then, as a datapath before it sleeps
      const TimeNs hint = w.next_expiry_hint_ns();
      ASSERT_LT(hint, earliest + kUs) << "a datapath sleeping until the hint would wake late, at " << now;
    }
    w.advance(now, [&](TimerId id, TimeNs at) {
      ASSERT_TRUE(due.count(id)) << "timer " << id << " of an idle QP fired";
      ASSERT_FALSE(fired.count(id)) << "timer " << id << " fired twice";
      ASSERT_EQ(at, due[id]);
      fired[id] = now;
      pending.erase(pending.find(at));
    });
  }
  ASSERT_EQ(fired.size(), due.size());
  for (const auto& [id, at] : fired) {
    EXPECT_GE(at, due[id]) << "timer " << id << " early";
    EXPECT_LT(at - due[id], kUs) << "timer " << id << " a slot late or more";
  }
  EXPECT_TRUE(w.empty());
}

}  // namespace
}  // namespace rdmad::cc
