#include "rdmad/cc/timing_wheel.h"

#include <stdexcept>

namespace rdmad::cc {

TimingWheel::TimingWheel(TimeNs slot_ns, unsigned levels, TimeNs start_ns)
    : slot_ns_(slot_ns), levels_(levels), horizon_ticks_(0), cursor_(0) {
  if (slot_ns <= 0) throw std::invalid_argument("timing wheel slot must be positive");
  if (levels == 0 || levels > kMaxLevels) throw std::invalid_argument("timing wheel levels must be 1..4");
  if (start_ns < 0) throw std::invalid_argument("timing wheel start time must not be negative");
  horizon_ticks_ = 1ULL << (kLevelBits * levels_);
  cursor_ = tick_of(start_ns);
}

uint64_t TimingWheel::tick_of(TimeNs t) const { return t <= 0 ? 0 : static_cast<uint64_t>(t / slot_ns_); }

void TimingWheel::push(TimerNode*& head, TimerNode& node, uint32_t where) {
  node.next_ = head;
  if (head != nullptr) head->pprev_ = &node.next_;
  head = &node;
  node.pprev_ = &head;
  node.where_ = where;
}

void TimingWheel::link(TimerNode& node) {
  const uint64_t due = tick_of(node.due_ns);
  if (due < cursor_) {  // overdue: the next advance hands it back first
    push(ready_, node, kReady);
    return;
  }
  const uint64_t diff = due ^ cursor_;
  if (diff >= horizon_ticks_) {
    push(overflow_, node, kOverflow);
    return;
  }
  const unsigned level = diff == 0 ? 0 : (static_cast<unsigned>(std::bit_width(diff)) - 1) / kLevelBits;
  const auto slot = static_cast<unsigned>((due >> (kLevelBits * level)) & (kSlots - 1));
  Level& lv = level_[level];
  lv.occupied[slot / 64] |= 1ULL << (slot % 64);
  push(lv.heads[slot], node, level * kSlots + slot);
}

void TimingWheel::insert(TimerNode& node) {
  if (node.pprev_ != nullptr) unlink(node);
  link(node);
  ++size_;
}

void TimingWheel::unlink(TimerNode& node) {
  *node.pprev_ = node.next_;
  if (node.next_ != nullptr) node.next_->pprev_ = node.pprev_;
  if (node.where_ < kReady) {
    const unsigned level = node.where_ / kSlots;
    const unsigned slot = node.where_ % kSlots;
    Level& lv = level_[level];
    if (lv.heads[slot] == nullptr) lv.occupied[slot / 64] &= ~(1ULL << (slot % 64));
  }
  node.next_ = nullptr;
  node.pprev_ = nullptr;
  --size_;
}

void TimingWheel::cancel(TimerNode& node) {
  if (node.pprev_ != nullptr) unlink(node);
}

TimerNode* TimingWheel::take_slot(unsigned level, unsigned slot) {
  Level& lv = level_[level];
  TimerNode* head = lv.heads[slot];
  lv.heads[slot] = nullptr;
  lv.occupied[slot / 64] &= ~(1ULL << (slot % 64));
  return head;
}

namespace {

// First set bit at index ≥ from in a 256-bit map; kSlots if none.
unsigned find_from(const std::array<uint64_t, 4>& bits, unsigned from) {
  if (from >= TimingWheel::kSlots) return TimingWheel::kSlots;
  unsigned word = from / 64;
  uint64_t w = bits[word] & (~0ULL << (from % 64));
  for (;;) {
    if (w != 0) return word * 64 + static_cast<unsigned>(std::countr_zero(w));
    if (++word == 4) return TimingWheel::kSlots;
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
    // A slot above level 0 at the cursor's own index is still uncascaded only when the cursor sits
    // exactly on its boundary.
    const bool on_boundary = l == 0 || (c & ((1ULL << shift) - 1)) == 0;
    const unsigned p = find_from(level_[l].occupied, on_boundary ? idx : idx + 1);
    if (p < kSlots) {
      const uint64_t block = c & ~((1ULL << (shift + kLevelBits)) - 1);
      return block | (static_cast<uint64_t>(p) << shift);
    }
  }
  if (overflow_ != nullptr) {
    return (c & (horizon_ticks_ - 1)) == 0 ? c : (c | (horizon_ticks_ - 1)) + 1;
  }
  return kNoTick;
}

void TimingWheel::cascade_at(uint64_t tick) {
  if ((tick & (horizon_ticks_ - 1)) == 0 && overflow_ != nullptr) {
    TimerNode* list = overflow_;
    overflow_ = nullptr;
    while (list != nullptr) {
      TimerNode* n = list;
      list = n->next_;
      link(*n);
    }
  }
  for (unsigned l = levels_ - 1; l >= 1; --l) {
    const unsigned shift = kLevelBits * l;
    if ((tick & ((1ULL << shift) - 1)) != 0) continue;
    TimerNode* list = take_slot(l, static_cast<unsigned>((tick >> shift) & (kSlots - 1)));
    while (list != nullptr) {
      TimerNode* n = list;
      list = n->next_;
      link(*n);
    }
  }
}

size_t TimingWheel::misplaced_for_test() const {
  size_t bad = 0;
  size_t count = 0;
  for (unsigned l = 0; l < levels_; ++l) {
    for (unsigned slot = 0; slot < kSlots; ++slot) {
      const bool bit = (level_[l].occupied[slot / 64] >> (slot % 64)) & 1;
      if (bit != (level_[l].heads[slot] != nullptr)) ++bad;
      for (const TimerNode* n = level_[l].heads[slot]; n != nullptr; n = n->next_) {
        ++count;
        const uint64_t due = tick_of(n->due_ns);
        if (due < cursor_) ++bad;
        const uint64_t diff = due ^ cursor_;
        const unsigned want = diff == 0 ? 0 : (static_cast<unsigned>(std::bit_width(diff)) - 1) / kLevelBits;
        const auto want_slot = static_cast<unsigned>((due >> (kLevelBits * want)) & (kSlots - 1));
        // An entry may sit higher than needed only in the slot the cursor sits at the boundary of
        // (its cascade is still owed).
        const uint64_t below = (1ULL << (kLevelBits * l)) - 1;
        const bool owed = l > want && (cursor_ & below) == 0 && slot == ((cursor_ >> (kLevelBits * l)) & (kSlots - 1));
        if (n->where_ != l * kSlots + slot || !((want == l && slot == want_slot) || owed)) {
          ++bad;
        }
      }
    }
  }
  for (const TimerNode* n = overflow_; n != nullptr; n = n->next_) ++count;
  for (const TimerNode* n = ready_; n != nullptr; n = n->next_) ++count;
  if (count != size_) ++bad;
  return bad;
}

TimeNs TimingWheel::next_expiry_hint_ns() const {
  const uint64_t t = next_interesting_tick();
  return t == kNoTick ? kNever : static_cast<TimeNs>(t) * slot_ns_;
}

}  // namespace rdmad::cc
