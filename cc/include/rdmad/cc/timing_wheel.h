#pragma once
// Hierarchical timing wheel (Varghese & Lauck, "Hashed and Hierarchical Timing Wheels", SOSP'87;
// the layout of Linux's timer wheel). Up to 4 levels of 1024 slots; level l slots are
// slot_ns·1024^l wide. An entry sits at the level of the highest 10-bit group in which its due tick
// differs from the wheel's cursor and moves down (cascades) when the cursor reaches its slot, so
// insert, cancel and expiry are O(1) and each entry cascades at most levels−1 times. Entries beyond
// the horizon (slot_ns·1024^levels; 12.7 days at 1 µs with 4 levels) wait in an overflow list that
// is re-sorted each time the cursor crosses a horizon boundary, so nothing is lost. Occupancy
// bitmaps let advance() skip idle time.
//
// Timers are named by the caller's own dense index (a flow index, say): the wheel keeps one 32-bit
// generation per timer, 4 bytes, and a slot is an array of 16-byte entries {timer, generation, due}.
// Cancel and reschedule only bump the timer's generation; the old entry stays where it is and is
// dropped when it reaches expiry (its generation no longer matches) or when next_expiry_hint_ns()
// walks past it, so a caller sleeping until the hint is not woken for a timer it cancelled.
// Cascading therefore copies entries between slot arrays sequentially without touching any
// per-timer memory, and expiry
// touches only the timer's generation word (prefetched; 1 M timers are 4 MB). Stale entries are
// bounded: when they outnumber live ones (plus a slack) the wheel drops them all in one sweep, and
// it sweeps at least once per 2^31 generation steps so a stale entry never outlives a generation
// wrap. Slot arrays keep their capacity, so in steady state insert allocates nothing.
//
// Expiry is at slot granularity and never early: an entry due at t is handed back by the first
// advance(now) with now ≥ t rounded up to a slot boundary, i.e. at most one slot late. (Early
// expiry would make a caller whose state is not yet due re-arm the same entry again and again.)
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "rdmad/cc/time.h"

namespace rdmad::cc {

// A timer: the caller's index in [0, timer_count()).
using TimerId = uint32_t;

class TimingWheel {
 public:
  static constexpr unsigned kLevelBits = 10;
  static constexpr unsigned kSlots = 1u << kLevelBits;
  static constexpr unsigned kMaxLevels = 4;
  static constexpr uint32_t kMaxTimers = 1u << 30;

  // `slot_ns`: granularity (e.g. 1000 for 1 µs); `timers`: ids 0..timers−1 (≤ kMaxTimers);
  // `levels`: 1..4 (horizon slot_ns·1024^levels); `start_ns`: the wheel's initial time.
  TimingWheel(TimeNs slot_ns, uint32_t timers, unsigned levels = kMaxLevels, TimeNs start_ns = 0);
  TimingWheel(const TimingWheel&) = delete;
  TimingWheel& operator=(const TimingWheel&) = delete;

  // Grows the id space to `timers` (new timers unscheduled); never shrinks. Allocates: not for the
  // hot path. Not from inside an advance() callback.
  void grow(uint32_t timers);
  uint32_t timer_count() const { return static_cast<uint32_t>(gen_.size()); }

  // Schedules timer `id` at `due_ns`, rescheduling it if already scheduled. A due time already
  // behind the cursor is handed back first by the next advance(), whatever its `now`.
  void insert(TimerId id, TimeNs due_ns);
  // Unschedules timer `id`; no-op if it is not scheduled.
  void cancel(TimerId id);
  bool scheduled(TimerId id) const { return (gen_[id] & 1) != 0; }

  // Hands every timer due by `now` (rounded down to a slot boundary) to
  // `on_expire(TimerId id, TimeNs due_ns)`, in due-slot order; the timer is unscheduled first. The
  // callback may insert or cancel any timer, including the one it got, but must not call advance()
  // or grow(). A timer inserted with a due time ≤ now is handed back in this same call if its slot
  // is still ahead of the cursor, otherwise by the next advance().
  template <typename F>
  void advance(TimeNs now, F&& on_expire);
  // Same, appending the due timers to `out`.
  void advance(TimeNs now, std::vector<TimerId>& out) {
    advance(now, [&out](TimerId id, TimeNs) { out.push_back(id); });
  }

  // A lower bound on the earliest live due time, for a caller that sleeps until then: exact (the
  // due slot's start) for a timer due within the cursor's level-0 block, else the start of the
  // higher-level slot holding it, whose cascade then refines it; the cursor if an overdue timer
  // waits; kNever if no timer is scheduled. Cancelled and rescheduled timers' stale entries do not
  // count: those it walks past are dropped (each once, so amortized O(1)). advance() to any later
  // time catches up on the cascades skipped. Not from inside an advance() callback.
  TimeNs next_expiry_hint_ns();

  // Scheduled timers.
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Entries left behind by cancel or reschedule and not yet dropped.
  size_t stale_entries() const { return stale_; }
  TimeNs slot_ns() const { return slot_ns_; }
  TimeNs horizon_ns() const { return slot_ns_ * static_cast<TimeNs>(horizon_ticks_); }
  // Time up to which everything has been handed back (exclusive start of the next slot).
  TimeNs cursor_ns() const { return static_cast<TimeNs>(cursor_) * slot_ns_; }

  // Walks every list and checks the placement, bitmap and count invariants; returns the number of
  // violations.
  size_t misplaced_for_test() const;

 private:
  struct Entry {
    TimerId id;
    uint32_t gen;  // the timer's generation when inserted: odd; live while it still matches
    TimeNs due_ns;
  };
  static_assert(sizeof(Entry) == 16);
  using List = std::vector<Entry>;
  static constexpr uint32_t kOverflow = kMaxLevels * kSlots;
  static constexpr uint32_t kReady = kOverflow + 1;  // inserted already overdue
  static constexpr uint64_t kNoTick = ~0ULL;
  static constexpr size_t kStaleSlack = 4096;
  static constexpr uint64_t kSweepEverySteps = 1ULL << 31;
  static constexpr size_t kPrefetchEntries = 16;
  static constexpr size_t kRelinkAhead = 16;
  static constexpr unsigned kPrefetchSlots = 4;
  static constexpr size_t kPrefetchSlotEntries = 64;

  uint64_t tick_of(TimeNs t) const;      // floor(t / slot_ns)
  uint64_t due_tick_of(TimeNs t) const;  // ceil(t / slot_ns)
  // The list an entry due at `due_ns` belongs in, by due tick relative to cursor_: level·kSlots +
  // slot, kOverflow or kReady.
  uint32_t where_of(TimeNs due_ns) const;
  List& list_of(uint32_t where);
  void push(uint32_t where, const Entry& e);
  // First tick ≥ cursor_ at which something must happen (expiry or cascade), or kNoTick.
  uint64_t next_interesting_tick() const;
  void cascade_at(uint64_t tick);
  void relink_all(List& list);
  void after_advance();
  // Prefetches the generation words of the first `max_entries` timers of level-0 `slot`.
  void prefetch_slot(unsigned slot, size_t max_entries) const;
  bool sweep_due() const { return stale_ > size_ + kStaleSlack || steps_since_sweep_ >= kSweepEverySteps; }
  // Drops every stale entry.
  void sweep();
  // Drops the stale entries at the front of `list` (up to its first live one); false if it is
  // now empty.
  bool drop_stale_front(List& list);
  template <typename F>
  void hand_back(F& on_expire);

  TimeNs slot_ns_;
  uint64_t slot_magic_;  // floor(2^64 / slot_ns) for division by multiplication; 0 when slot_ns = 1
  unsigned levels_;
  uint64_t horizon_ticks_;
  uint64_t cursor_;  // first tick not yet handed back
  size_t size_ = 0;
  size_t stale_ = 0;
  uint64_t steps_since_sweep_ = 0;  // generation increments since the last sweep
  bool in_advance_ = false;
  uint64_t prefetched_at_ = kNoTick;  // cursor_ when after_advance() last prefetched
  // Per timer: odd while scheduled; +1 on expiry and cancel, +1 (or +2 when rescheduling) on insert.
  std::vector<uint32_t> gen_;
  std::array<List, kMaxLevels * kSlots> slots_;
  std::array<std::array<uint64_t, kSlots / 64>, kMaxLevels> occupied_{};
  List overflow_;
  List ready_;
  List expiring_;
  List scratch_;
};

template <typename F>
void TimingWheel::hand_back(F& on_expire) {
  constexpr size_t kAhead = 16;  // covers a cache miss at a few ns of work per entry
  const Entry* batch = expiring_.data();
  const size_t n = expiring_.size();
  uint32_t* gen = gen_.data();
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) __builtin_prefetch(&gen[batch[i + kAhead].id], 1);
    const Entry e = batch[i];
    if (gen[e.id] != e.gen) {  // cancelled, rescheduled, or re-armed by an earlier callback
      --stale_;
      continue;
    }
    ++gen[e.id];
    --size_;
    ++steps_since_sweep_;
    on_expire(e.id, e.due_ns);
    gen = gen_.data();
  }
  expiring_.clear();
}

template <typename F>
void TimingWheel::advance(TimeNs now, F&& on_expire) {
  if (now < 0) return;
  const uint64_t target = tick_of(now);
  in_advance_ = true;
  if (!ready_.empty()) {
    std::swap(expiring_, ready_);  // ready_ gets the (empty) previous batch array's capacity
    hand_back(on_expire);
  }
  // Stale entries are walked too (and dropped at their slot) so that every entry stays placed
  // relative to the cursor.
  while (size_ + stale_ != 0) {
    const uint64_t t = next_interesting_tick();
    if (t == kNoTick || t > target) break;
    cursor_ = t;
    cascade_at(t);
    const auto slot = static_cast<uint32_t>(t & (kSlots - 1));
    // The cursor moves past t before callbacks run, so re-inserted entries never land in the slot
    // being emptied.
    cursor_ = t + 1;
    if (slots_[slot].empty()) continue;
    occupied_[0][slot / 64] &= ~(1ULL << (slot % 64));
    std::swap(expiring_, slots_[slot]);
    hand_back(on_expire);
  }
  if (target + 1 > cursor_) cursor_ = target + 1;
  in_advance_ = false;
  after_advance();
}

}  // namespace rdmad::cc
