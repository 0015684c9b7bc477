#pragma once
// Hierarchical timing wheel (Varghese & Lauck, "Hashed and Hierarchical Timing Wheels", SOSP'87;
// the layout of Linux's timer wheel). Up to 4 levels of 1024 slots; level l slots are
// slot_ns·1024^l wide. An entry sits at the level of the highest 10-bit group in which its due tick
// differs from the wheel's cursor and moves down (cascades) when the cursor reaches its slot, so
// insert, cancel and expiry are O(1) and each entry cascades at most levels−1 times (1024 rather
// than 256 slots per level: measured ~15% faster, fewer cascades). Entries beyond the horizon
// (slot_ns·1024^levels; 12.7 days at 1 µs with 4 levels) wait in an overflow list that is re-sorted each time
// the cursor crosses a horizon boundary, so nothing is lost. Occupancy bitmaps let advance() skip idle time.
//
// Entries are intrusive (TimerNode, owned by the caller, usually beside its per-flow state) and
// hold their own position, so cancel is O(1). A slot is an array of node pointers rather than a
// linked list: expiring or cascading a slot then loads its nodes independently (and prefetched)
// instead of chasing one pointer per node, which is what keeps a wheel with a million random
// entries fast. Slot arrays grow to the peak population of a slot and keep their capacity, so in
// steady state insert allocates nothing.
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

struct TimerNode {
  TimeNs due_ns = 0;
  uint64_t cookie = 0;  // caller's data (a flow index, say)

 private:
  friend class TimingWheel;
  uint32_t where_ = 0xffffffffu;  // level·kSlots + slot, or a TimingWheel::k* list; kUnscheduled
  uint32_t index_ = 0;            // position in that list
};
static_assert(sizeof(TimerNode) == 24);

class TimingWheel {
 public:
  static constexpr unsigned kLevelBits = 10;
  static constexpr unsigned kSlots = 1u << kLevelBits;
  static constexpr unsigned kMaxLevels = 4;

  // `slot_ns`: granularity (e.g. 1000 for 1 µs); `levels`: 1..4 (horizon slot_ns·1024^levels);
  // `start_ns`: the wheel's initial time.
  explicit TimingWheel(TimeNs slot_ns, unsigned levels = kMaxLevels, TimeNs start_ns = 0);
  TimingWheel(const TimingWheel&) = delete;
  TimingWheel& operator=(const TimingWheel&) = delete;

  // Schedules `node` at node.due_ns (set it first), rescheduling it if already scheduled. A due
  // time already behind the cursor is handed back first by the next advance(), whatever its `now`.
  void insert(TimerNode& node);
  void insert(TimerNode& node, TimeNs due_ns) {
    node.due_ns = due_ns;
    insert(node);
  }
  // Removes `node` if scheduled; no-op otherwise.
  void cancel(TimerNode& node);
  static bool scheduled(const TimerNode& node) { return node.where_ != kUnscheduled; }

  // Hands every entry due by `now` (rounded down to a slot boundary) to `on_expire(TimerNode&)`, in due-slot
  // order. The callback may insert or cancel any node, including the one it got, but must not call
  // advance(). An entry inserted with a due time ≤ now is handed back in this same call if its
  // slot is still ahead of the cursor, otherwise by the next advance().
  template <typename F>
  void advance(TimeNs now, F&& on_expire);
  // Same, appending the due entries to `out`.
  void advance(TimeNs now, std::vector<TimerNode*>& out) {
    advance(now, [&out](TimerNode& n) { out.push_back(&n); });
  }

  // Earliest slot-start time at which advance() may have work (expiry or cascade); kNever if the
  // wheel is empty.
  TimeNs next_expiry_hint_ns() const;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  TimeNs slot_ns() const { return slot_ns_; }
  TimeNs horizon_ns() const { return slot_ns_ * static_cast<TimeNs>(horizon_ticks_); }
  // Time up to which everything has been handed back (exclusive start of the next slot).
  TimeNs cursor_ns() const { return static_cast<TimeNs>(cursor_) * slot_ns_; }

  // Walks every list and checks the placement invariant; returns the number of misplaced entries.
  size_t misplaced_for_test() const;

 private:
  static constexpr uint32_t kUnscheduled = 0xffffffffu;
  static constexpr uint32_t kOverflow = 0xfffffffeu;
  static constexpr uint32_t kReady = 0xfffffffdu;  // inserted already overdue
  static constexpr uint64_t kNoTick = ~0ULL;
  using List = std::vector<TimerNode*>;

  uint64_t tick_of(TimeNs t) const;      // floor(t / slot_ns)
  uint64_t due_tick_of(TimeNs t) const;  // ceil(t / slot_ns)
  List& list_of(uint32_t where);
  void link(TimerNode& node);  // places by due tick relative to cursor_
  void push(TimerNode& node, uint32_t where);
  void unlink(TimerNode& node);
  // First tick ≥ cursor_ at which something must happen (expiry or cascade), or kNoTick.
  uint64_t next_interesting_tick() const;
  void cascade_at(uint64_t tick);
  void relink_all(List& list);
  // Moves the list at `where` into expiring_. Its nodes keep where_/index_: a node whose where_ is
  // expiring_where_ and that sits at expiring_[index_] is in the batch (new entries of the same
  // slot go to the emptied slot array, where that test fails), so callbacks can cancel in O(1).
  void begin_expiry(uint32_t where);
  template <typename F>
  void hand_back(F& on_expire);

  TimeNs slot_ns_;
  uint64_t slot_magic_;  // floor(2^64 / slot_ns) for division by multiplication; 0 when slot_ns = 1
  unsigned levels_;
  uint64_t horizon_ticks_;
  uint64_t cursor_;  // first tick not yet handed back
  size_t size_ = 0;
  std::array<List, kMaxLevels * kSlots> slots_;
  std::array<std::array<uint64_t, kSlots / 64>, kMaxLevels> occupied_{};
  List overflow_;
  List ready_;
  List expiring_;
  uint32_t expiring_where_ = kUnscheduled;
  List scratch_;
};

template <typename F>
void TimingWheel::hand_back(F& on_expire) {
  constexpr size_t kAhead = 16;  // covers a DRAM miss at a few ns of work per node
  for (size_t i = 0; i < expiring_.size(); ++i) {
    if (i + kAhead < expiring_.size()) __builtin_prefetch(expiring_[i + kAhead], 1);
    TimerNode* n = expiring_[i];
    if (n == nullptr) continue;  // cancelled or rescheduled by an earlier callback
    expiring_[i] = nullptr;      // no longer in the batch, whatever the callback does with it
    n->where_ = kUnscheduled;
    --size_;
    on_expire(*n);
  }
  expiring_.clear();
  expiring_where_ = kUnscheduled;
}

template <typename F>
void TimingWheel::advance(TimeNs now, F&& on_expire) {
  if (now < 0) return;
  const uint64_t target = tick_of(now);
  if (!ready_.empty()) {
    begin_expiry(kReady);
    hand_back(on_expire);
  }
  while (size_ != 0) {
    const uint64_t t = next_interesting_tick();
    if (t == kNoTick || t > target) break;
    cursor_ = t;
    cascade_at(t);
    const uint32_t slot = static_cast<uint32_t>(t & (kSlots - 1));
    // The cursor moves past t before callbacks run, so re-inserted entries never land in the slot
    // being emptied.
    cursor_ = t + 1;
    if (slots_[slot].empty()) continue;
    occupied_[0][slot / 64] &= ~(1ULL << (slot % 64));
    begin_expiry(slot);
    hand_back(on_expire);
  }
  if (target + 1 > cursor_) cursor_ = target + 1;
}

}  // namespace rdmad::cc
