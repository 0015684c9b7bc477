#include "rdmad/cc/timing_wheel.h"

#include <stdexcept>
#include <utility>

namespace rdmad::cc {

namespace {
__extension__ using Uint128 = unsigned __int128;
}  // namespace

TimingWheel::TimingWheel(TimeNs slot_ns, uint32_t timers, unsigned levels, TimeNs start_ns)
    : slot_ns_(slot_ns), slot_magic_(0), levels_(levels), horizon_ticks_(0), cursor_(0) {
  if (slot_ns <= 0) throw std::invalid_argument("timing wheel slot must be positive");
  if (levels == 0 || levels > kMaxLevels) throw std::invalid_argument("timing wheel levels must be 1..4");
  if (start_ns < 0) throw std::invalid_argument("timing wheel start time must not be negative");
  horizon_ticks_ = 1ULL << (kLevelBits * levels_);
  const auto d = static_cast<uint64_t>(slot_ns);
  // floor(2^64 / d), computed as floor((2^64 − 1) / d) adjusted: exact unless d divides 2^64.
  slot_magic_ = d == 1 ? 0 : ~0ULL / d + ((~0ULL % d) + 1 == d ? 1 : 0);
  cursor_ = tick_of(start_ns);
  grow(timers);
}

void TimingWheel::grow(uint32_t timers) {
  if (timers > kMaxTimers) throw std::invalid_argument("timing wheel: too many timers");
  if (timers > gen_.size()) gen_.resize(timers, 0);
}

// t / slot_ns without a hardware divide (one per insert adds up): q = mulhi(t, floor(2^64/d)) is
// floor(t/d) or one less; one multiply-compare fixes it.
namespace {
[[gnu::always_inline]] inline uint64_t divide(TimeNs t, uint64_t d, uint64_t magic) {
  if (t <= 0) return 0;
  const auto u = static_cast<uint64_t>(t);
  if (magic == 0) return u;
  auto q = static_cast<uint64_t>((static_cast<Uint128>(u) * magic) >> 64);
  if (u - q * d >= d) ++q;
  return q;
}
}  // namespace

uint64_t TimingWheel::tick_of(TimeNs t) const {
  return divide(t, static_cast<uint64_t>(slot_ns_), slot_magic_);
}

// Entries never fire early: an entry due inside a slot belongs to the next slot boundary.
[[gnu::always_inline]] inline uint64_t TimingWheel::due_tick_of(TimeNs t) const {
  const uint64_t floor_tick = divide(t, static_cast<uint64_t>(slot_ns_), slot_magic_);
  return t > 0 && floor_tick * static_cast<uint64_t>(slot_ns_) != static_cast<uint64_t>(t) ? floor_tick + 1
                                                                                           : floor_tick;
}

[[gnu::always_inline]] inline uint32_t TimingWheel::where_of(TimeNs due_ns) const {
  const uint64_t due = due_tick_of(due_ns);
  if (due < cursor_) return kReady;
  const uint64_t diff = due ^ cursor_;
  if (diff >= horizon_ticks_) return kOverflow;
  const unsigned level = diff == 0 ? 0 : (static_cast<unsigned>(std::bit_width(diff)) - 1) / kLevelBits;
  return level * kSlots + static_cast<unsigned>((due >> (kLevelBits * level)) & (kSlots - 1));
}

[[gnu::always_inline]] inline TimingWheel::List& TimingWheel::list_of(uint32_t where) {
  if (where < kOverflow) [[likely]]
    return slots_[where];
  return where == kOverflow ? overflow_ : ready_;
}

[[gnu::always_inline]] inline void TimingWheel::push(uint32_t where, const Entry& e) {
  if (where < kOverflow) [[likely]]
    occupied_[where / kSlots][(where % kSlots) / 64] |= 1ULL << (where % 64);
  List& list = list_of(where);
  list.push_back(e);
  // Slots fill a few entries at a time, interleaved with a thousand others: start fetching the
  // slot's next cache line now so the append that reaches it does not wait for memory.
  __builtin_prefetch(list.data() + list.size() + 64 / sizeof(Entry), 1);
}

void TimingWheel::insert(TimerId id, TimeNs due_ns) {
  uint32_t& gen = gen_[id];
  if ((gen & 1) != 0) {
    gen += 2;  // the entry already in the wheel goes stale
    ++stale_;
    steps_since_sweep_ += 2;
  } else {
    gen += 1;
    ++size_;
    ++steps_since_sweep_;
  }
  push(where_of(due_ns), Entry{id, gen, due_ns});
  if (sweep_due() && !in_advance_) [[unlikely]]
    sweep();
}

void TimingWheel::cancel(TimerId id) {
  uint32_t& gen = gen_[id];
  if ((gen & 1) == 0) return;
  ++gen;
  --size_;
  ++stale_;
  ++steps_since_sweep_;
  if (sweep_due() && !in_advance_) [[unlikely]]
    sweep();
}

// A cascade scatters a slot's entries over up to 1024 slots whose tails are cold: destinations
// are computed kRelinkAhead entries early and their tails prefetched.
void TimingWheel::relink_all(List& list) {
  std::swap(scratch_, list);  // the list gets scratch_'s (empty) capacity back
  const Entry* entries = scratch_.data();
  const size_t n = scratch_.size();
  std::array<uint32_t, kRelinkAhead> where;
  const auto plan = [&](size_t i) {
    const uint32_t w = where_of(entries[i].due_ns);
    where[i % kRelinkAhead] = w;
    const List& to = list_of(w);
    __builtin_prefetch(to.data() + to.size(), 1);
  };
  for (size_t i = 0; i < n && i < kRelinkAhead; ++i) plan(i);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t w = where[i % kRelinkAhead];
    if (i + kRelinkAhead < n) plan(i + kRelinkAhead);
    push(w, entries[i]);
  }
  scratch_.clear();
}

namespace {

// First set bit at index ≥ from in a kSlots-bit map; kSlots if none.
unsigned find_from(const std::array<uint64_t, TimingWheel::kSlots / 64>& bits, unsigned from) {
  if (from >= TimingWheel::kSlots) return TimingWheel::kSlots;
  unsigned word = from / 64;
  uint64_t w = bits[word] & (~0ULL << (from % 64));
  for (;;) {
    if (w != 0) return word * 64 + static_cast<unsigned>(std::countr_zero(w));
    if (++word == bits.size()) return TimingWheel::kSlots;
    w = bits[word];
  }
}

}  // namespace

uint64_t TimingWheel::next_interesting_tick() const {
  const uint64_t c = cursor_;
  // A cursor on a block boundary (left there by an earlier advance) still owes that boundary's
  // cascade, which may feed slots before any later level-0 entry.
  if ((c & (kSlots - 1)) == 0) return c;
  for (unsigned l = 0; l < levels_; ++l) {
    const unsigned shift = kLevelBits * l;
    const auto idx = static_cast<unsigned>((c >> shift) & (kSlots - 1));
    // Above level 0 the cursor's own slot was cascaded when the cursor entered it.
    const unsigned p = find_from(occupied_[l], l == 0 ? idx : idx + 1);
    if (p < kSlots) {
      const uint64_t block = c & ~((1ULL << (shift + kLevelBits)) - 1);
      return block | (static_cast<uint64_t>(p) << shift);
    }
  }
  if (!overflow_.empty()) return (c | (horizon_ticks_ - 1)) + 1;
  return kNoTick;
}

void TimingWheel::cascade_at(uint64_t tick) {
  if ((tick & (horizon_ticks_ - 1)) == 0 && !overflow_.empty()) relink_all(overflow_);
  for (unsigned l = levels_ - 1; l >= 1; --l) {
    const unsigned shift = kLevelBits * l;
    if ((tick & ((1ULL << shift) - 1)) != 0) continue;
    const auto slot = static_cast<unsigned>((tick >> shift) & (kSlots - 1));
    if (slots_[l * kSlots + slot].empty()) continue;
    occupied_[l][slot / 64] &= ~(1ULL << (slot % 64));
    relink_all(slots_[l * kSlots + slot]);
  }
}

void TimingWheel::prefetch_slot(unsigned slot, size_t max_entries) const {
  const List& list = slots_[slot];
  const size_t n = list.size() < max_entries ? list.size() : max_entries;
  for (size_t i = 0; i < n; ++i) __builtin_prefetch(&gen_[list[i].id], 1);
}

void TimingWheel::after_advance() {
  if (sweep_due()) sweep();
  if (cursor_ == prefetched_at_) return;  // callers often advance many times per slot
  prefetched_at_ = cursor_;
  // Expiry waits on each timer's generation word. Load the next occupied slot's first ones now,
  // while the caller does other work, and, for a wheel stepped slot by slot, those of the slot
  // kPrefetchSlots ahead, so each slot's words have a few steps to arrive.
  const auto from = static_cast<unsigned>(cursor_ & (kSlots - 1));
  const unsigned next = find_from(occupied_[0], from);
  if (next == kSlots) return;
  prefetch_slot(next, kPrefetchEntries);
  const unsigned ahead = from + kPrefetchSlots;
  if (ahead > next && ahead < kSlots) prefetch_slot(ahead, kPrefetchSlotEntries);
}

void TimingWheel::sweep() {
  steps_since_sweep_ = 0;
  if (stale_ == 0) return;
  const auto stale = [this](const Entry& e) { return gen_[e.id] != e.gen; };
  for (unsigned l = 0; l < levels_; ++l) {
    for (unsigned word = 0; word < kSlots / 64; ++word) {
      for (uint64_t bits = occupied_[l][word]; bits != 0; bits &= bits - 1) {
        const unsigned slot = word * 64 + static_cast<unsigned>(std::countr_zero(bits));
        List& list = slots_[l * kSlots + slot];
        std::erase_if(list, stale);
        if (list.empty()) occupied_[l][word] &= ~(1ULL << (slot % 64));
      }
    }
  }
  std::erase_if(overflow_, stale);
  std::erase_if(ready_, stale);
  stale_ = 0;
}

bool TimingWheel::drop_stale_front(List& list) {
  size_t i = 0;
  while (i < list.size() && gen_[list[i].id] != list[i].gen) ++i;
  if (i != 0) {
    list.erase(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(i));
    stale_ -= i;
  }
  return !list.empty();
}

// Levels are walked in time order: every level-l slot after the cursor's starts after the cursor's
// whole level-(l−1) block, so per level the first slot holding a live entry is the candidate and a
// level whose first such slot starts no earlier than the best so far cannot improve it. A slot
// whose cascade is still owed (the cursor on its level's block boundary) starts at the cursor.
TimeNs TimingWheel::next_expiry_hint_ns() {
  if (size_ == 0) return kNever;
  if (!ready_.empty() && drop_stale_front(ready_)) return cursor_ns();
  const uint64_t c = cursor_;
  uint64_t best = kNoTick;
  for (unsigned l = 0; l < levels_; ++l) {
    const unsigned shift = kLevelBits * l;
    const auto idx = static_cast<unsigned>((c >> shift) & (kSlots - 1));
    // The cursor's own slot: not yet handed back at level 0; its cascade still owed above.
    const bool own = l == 0 || (c & ((1ULL << shift) - 1)) == 0;
    const uint64_t block = c & ~((1ULL << (shift + kLevelBits)) - 1);
    for (unsigned p = find_from(occupied_[l], own ? idx : idx + 1); p < kSlots;
         p = find_from(occupied_[l], p + 1)) {
      const uint64_t start = block | (static_cast<uint64_t>(p) << shift);
      if (start >= best) break;
      if (drop_stale_front(slots_[l * kSlots + p])) {
        best = start;
        break;
      }
      occupied_[l][p / 64] &= ~(1ULL << (p % 64));  // held only stale entries: now empty
    }
  }
  if (!overflow_.empty()) {
    // Re-sorted at the next horizon boundary, or at the cursor's own if that is still owed.
    const uint64_t boundary = (c & (horizon_ticks_ - 1)) == 0 ? c : (c | (horizon_ticks_ - 1)) + 1;
    if (boundary < best) best = boundary;
  }
  return best == kNoTick ? kNever : static_cast<TimeNs>(best) * slot_ns_;
}

size_t TimingWheel::misplaced_for_test() const {
  size_t bad = 0;
  size_t live = 0;
  size_t stale = 0;
  const auto count = [&](const Entry& e) {
    if (e.id >= gen_.size() || (e.gen & 1) == 0) ++bad;
    (e.id < gen_.size() && gen_[e.id] == e.gen ? live : stale) += 1;
  };
  for (const Entry& e : ready_) {
    count(e);
    if (due_tick_of(e.due_ns) >= cursor_) ++bad;
  }
  for (const Entry& e : overflow_) {
    count(e);
    // ... unless the cursor is on a horizon boundary, whose re-examination is still owed.
    if ((due_tick_of(e.due_ns) ^ cursor_) < horizon_ticks_ && (cursor_ & (horizon_ticks_ - 1)) != 0) ++bad;
  }
  for (unsigned l = 0; l < levels_; ++l) {
    for (unsigned slot = 0; slot < kSlots; ++slot) {
      const List& list = slots_[l * kSlots + slot];
      const bool bit = (occupied_[l][slot / 64] >> (slot % 64)) & 1;
      if (bit != !list.empty()) ++bad;
      for (const Entry& e : list) {
        count(e);
        const uint64_t due = due_tick_of(e.due_ns);
        if (due < cursor_) ++bad;
        const uint64_t diff = due ^ cursor_;
        const unsigned want = diff == 0 ? 0 : (static_cast<unsigned>(std::bit_width(diff)) - 1) / kLevelBits;
        const auto want_slot = static_cast<unsigned>((due >> (kLevelBits * want)) & (kSlots - 1));
        // An entry may sit higher than needed only in the slot whose boundary the cursor is on
        // (its cascade is still owed).
        const uint64_t below = (1ULL << (kLevelBits * l)) - 1;
        const bool owed =
            l > want && (cursor_ & below) == 0 && slot == ((cursor_ >> (kLevelBits * l)) & (kSlots - 1));
        if (!((want == l && slot == want_slot) || owed)) ++bad;
      }
    }
  }
  if (live != size_) ++bad;
  if (stale != stale_) ++bad;
  size_t scheduled = 0;
  for (const uint32_t g : gen_) scheduled += g & 1;
  if (scheduled != size_) ++bad;
  return bad;
}

}  // namespace rdmad::cc
