#include "rdmad/sim/event_queue.h"

namespace rdmad::sim {

// A hand-rolled sift (rather than std::push_heap) keeps the hole-moving variant: one copy per level.
void EventQueue::push(SimTimeNs time_ns, EventKind kind, uint32_t a, uint32_t b) {
  heap_.emplace_back();
  sift_up(heap_.size() - 1, Event{time_ns, next_seq_++, a, b, kind});
}

void EventQueue::sift_up(size_t i, const Event& ev) {
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!before(ev, heap_[parent])) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = ev;
}

// Floyd's variant: walk the hole down to a leaf along the smaller children (one comparison per level),
// then sift the last element up from there; it rarely climbs, so this beats the textbook sift-down.
Event EventQueue::pop() {
  Event top = heap_.front();
  Event last = heap_.back();
  heap_.pop_back();
  const size_t n = heap_.size();
  if (n == 0) return top;
  size_t i = 0;
  for (size_t child = 1; child < n; child = 2 * i + 1) {
    if (child + 1 < n && before(heap_[child + 1], heap_[child])) ++child;
    heap_[i] = heap_[child];
    i = child;
  }
  sift_up(i, last);
  return top;
}

}  // namespace rdmad::sim
