#include "rdmad/sim/event_queue.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace rdmad::sim {

void EventQueue::refill() {
  buckets_[0].clear();
  head_ = 0;
  const unsigned i = static_cast<unsigned>(__builtin_ctzll(nonempty_)) + 1;  // the queue is not empty
  std::vector<Event>& from = buckets_[i];
  uint64_t earliest = static_cast<uint64_t>(from.front().time_ns);
  for (const Event& e : from) earliest = std::min(earliest, static_cast<uint64_t>(e.time_ns));
  last_ = earliest;
  nonempty_ &= ~(uint64_t{1} << (i - 1));
  // In the bucket's order: events of equal times reach their lower bucket in scheduling order.
  for (const Event& e : from) {
    const unsigned j = bucket_of(static_cast<uint64_t>(e.time_ns));
    buckets_[j].push_back(e);
    if (j != 0) nonempty_ |= uint64_t{1} << (j - 1);
  }
  from.clear();
}

void EventQueue::past(SimTimeNs time_ns) const {
  std::fprintf(stderr, "rdmad-sim: bug: an event scheduled at %lld ns, before the current time %llu ns\n",
               static_cast<long long>(time_ns), static_cast<unsigned long long>(last_));
  std::abort();
}

}  // namespace rdmad::sim
