#include "rdmad/cc/timing_wheel.h"

#include <stdexcept>
#include <utility>

namespace rdmad::cc {

namespace {
__extension__ using Uint128 = unsigned __int128;
// Nodes are loaded this many positions ahead when a slot expires or cascades: far enough to cover
// a DRAM miss at a few ns of work per node.
constexpr size_t kPrefetchAhead = 16;
}  // namespace

TimingWheel::TimingWheel(TimeNs slot_ns, unsigned levels, TimeNs start_ns)
    : slot_ns_(slot_ns), slot_magic_(0), levels_(levels), horizon_ticks_(0), cursor_(0) {
  if (slot_ns <= 0) throw std::invalid_argument("timing wheel slot must be positive");
  if (levels == 0 || levels > kMaxLevels) throw std::invalid_argument("timing wheel levels must be 1..4");
  if (start_ns < 0) throw std::invalid_argument("timing wheel start time must not be negative");
  horizon_ticks_ = 1ULL << (kLevelBits * levels_);
  const auto d = static_cast<uint64_t>(slot_ns);
  // floor(2^64 / d), computed as floor((2^64 − 1) / d) adjusted: exact unless d divides 2^64.
  slot_magic_ = d == 1 ? 0 : ~0ULL / d + ((~0ULL % d) + 1 == d ? 1 : 0);
  cursor_ = tick_of(start_ns);
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

[[gnu::always_inline]] inline TimingWheel::List& TimingWheel::list_of(uint32_t where) {
  switch (where) {
    case kOverflow:
      return overflow_;
    case kReady:
      return ready_;
    default:
      return slots_[where];
  }
}

[[gnu::always_inline]] inline void TimingWheel::push(TimerNode& node, uint32_t where) {
  List& list = list_of(where);
  node.where_ = where;
  node.index_ = static_cast<uint32_t>(list.size());
  list.push_back(&node);
}

// Entries never fire early: an entry due inside a slot belongs to the next slot boundary.
[[gnu::always_inline]] inline uint64_t TimingWheel::due_tick_of(TimeNs t) const {
  const uint64_t floor_tick = divide(t, static_cast<uint64_t>(slot_ns_), slot_magic_);
  return t > 0 && floor_tick * static_cast<uint64_t>(slot_ns_) != static_cast<uint64_t>(t) ? floor_tick + 1
                                                                                           : floor_tick;
}

[[gnu::always_inline]] inline void TimingWheel::link(TimerNode& node) {
  const uint64_t due = due_tick_of(node.due_ns);
  if (due < cursor_) {
    push(node, kReady);
    return;
  }
  const uint64_t diff = due ^ cursor_;
  if (diff >= horizon_ticks_) {
    push(node, kOverflow);
    return;
  }
  const unsigned level = diff == 0 ? 0 : (static_cast<unsigned>(std::bit_width(diff)) - 1) / kLevelBits;
  const auto slot = static_cast<unsigned>((due >> (kLevelBits * level)) & (kSlots - 1));
  occupied_[level][slot / 64] |= 1ULL << (slot % 64);
  push(node, level * kSlots + slot);
}

void TimingWheel::insert(TimerNode& node) {
  if (node.where_ != kUnscheduled) unlink(node);
  link(node);
  ++size_;
}

void TimingWheel::unlink(TimerNode& node) {
  if (node.where_ == expiring_where_ && node.index_ < expiring_.size() && expiring_[node.index_] == &node) {
    expiring_[node.index_] = nullptr;  // in the batch being handed back: positions must stay put
  } else {
    List& list = list_of(node.where_);
    TimerNode* last = list.back();
    list[node.index_] = last;
    last->index_ = node.index_;
    list.pop_back();
    if (node.where_ < kMaxLevels * kSlots && list.empty()) {
      const uint32_t level = node.where_ / kSlots;
      const uint32_t slot = node.where_ % kSlots;
      occupied_[level][slot / 64] &= ~(1ULL << (slot % 64));
    }
  }
  node.where_ = kUnscheduled;
  --size_;
}

void TimingWheel::cancel(TimerNode& node) {
  if (node.where_ != kUnscheduled) unlink(node);
}

void TimingWheel::begin_expiry(uint32_t where) {
  std::swap(expiring_, list_of(where));  // the list gets the (empty) previous batch array's capacity
  expiring_where_ = where;
}

void TimingWheel::relink_all(List& list) {
  std::swap(scratch_, list);
  const size_t n = scratch_.size();
  for (size_t i = 0; i < n; ++i) {
    if (i + kPrefetchAhead < n) __builtin_prefetch(scratch_[i + kPrefetchAhead], 1);
    link(*scratch_[i]);
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

TimeNs TimingWheel::next_expiry_hint_ns() const {
  if (size_ == 0) return kNever;
  if (!ready_.empty()) return cursor_ns();
  const uint64_t t = next_interesting_tick();
  return t == kNoTick ? kNever : static_cast<TimeNs>(t) * slot_ns_;
}

size_t TimingWheel::misplaced_for_test() const {
  size_t bad = 0;
  size_t count = overflow_.size() + ready_.size();
  for (unsigned l = 0; l < levels_; ++l) {
    for (unsigned slot = 0; slot < kSlots; ++slot) {
      const List& list = slots_[l * kSlots + slot];
      const bool bit = (occupied_[l][slot / 64] >> (slot % 64)) & 1;
      if (bit != !list.empty()) ++bad;
      for (size_t i = 0; i < list.size(); ++i) {
        const TimerNode* n = list[i];
        ++count;
        const uint64_t due = due_tick_of(n->due_ns);
        if (due < cursor_) ++bad;
        const uint64_t diff = due ^ cursor_;
        const unsigned want = diff == 0 ? 0 : (static_cast<unsigned>(std::bit_width(diff)) - 1) / kLevelBits;
        const auto want_slot = static_cast<unsigned>((due >> (kLevelBits * want)) & (kSlots - 1));
        // An entry may sit higher than needed only in the slot whose boundary the cursor is on
        // (its cascade is still owed).
        const uint64_t below = (1ULL << (kLevelBits * l)) - 1;
        const bool owed =
            l > want && (cursor_ & below) == 0 && slot == ((cursor_ >> (kLevelBits * l)) & (kSlots - 1));
        if (n->where_ != l * kSlots + slot || n->index_ != i || !((want == l && slot == want_slot) || owed))
          ++bad;
      }
    }
  }
  if (count != size_) ++bad;
  return bad;
}

}  // namespace rdmad::cc
