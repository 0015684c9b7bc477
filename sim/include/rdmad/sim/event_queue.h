#pragma once
// Discrete-event core: small fixed-size events popped in (time, insertion sequence) order, from a
// monotone radix heap. The sequence order makes ties deterministic, so a run depends only on its seed.
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace rdmad::sim {

using SimTimeNs = int64_t;

enum class EventKind : uint8_t {
  kTxDone,     // a port finished serialising its current packet (a = port)
  kArrive,     // the head packet on a link reaches its far end (a = sending port)
  kFlowStart,  // a flow becomes active (a = flow)
  kFlowReady,  // a paced flow may send its next packet (a = flow)
  kRpTimer,    // the reaction point's next increase event is due (a = flow)
  kNpTimer,    // a deferred CNP is due (a = flow)
  kPause,      // a PFC frame reaches a port (a = port, b = 1 pause / 0 resume)
  kRetxTimer,  // a sender's retransmit timeout is due (a = flow)
  kSample,     // periodic measurement
};

struct Event {
  SimTimeNs time_ns;
  uint64_t seq;
  uint32_t a;
  uint32_t b;
  EventKind kind;
};
static_assert(sizeof(Event) <= 32);

class EventQueue {
 public:
  // Schedules an event; events at equal times run in scheduling order. `time_ns` is never before
  // the last popped event's time (a discrete-event run does not schedule into its past): the queue
  // is monotone, which is what lets it be a radix heap.
  void push(SimTimeNs time_ns, EventKind kind, uint32_t a, uint32_t b = 0) {
    const uint64_t t = static_cast<uint64_t>(time_ns);
    if (t < last_) past(time_ns);
    const unsigned i = bucket_of(t);
    buckets_[i].push_back(Event{time_ns, next_seq_++, a, b, kind});
    if (i != 0) nonempty_ |= uint64_t{1} << (i - 1);
    ++size_;
  }
  // Removes and returns the earliest event; the queue must not be empty.
  Event pop() {
    if (head_ == buckets_[0].size()) refill();
    --size_;
    return buckets_[0][head_++];
  }
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // The earliest event's time; the queue must not be empty.
  SimTimeNs next_time() {
    if (head_ == buckets_[0].size()) refill();
    return static_cast<SimTimeNs>(last_);
  }

 private:
  // A radix heap over event times (Ahuja, Mehlhorn, Orlin, Tarjan 1990). Bucket 0 holds the events
  // at exactly last_ (the latest popped time), in scheduling order; bucket i > 0 those whose time
  // first differs from last_ in bit i-1. Refilling bucket 0 takes the lowest non-empty bucket,
  // makes its earliest time the new last_ and spreads its events over lower buckets; an event
  // moves down at most 64 times in all, and each bucket is a plain array walked in order, where a
  // binary heap of 17,000 events jumps across 540 KB per pop. Order among equal times is kept:
  // a bucket is only ever appended to, and filled from a higher one only while it is empty.
  unsigned bucket_of(uint64_t t) const {
    const uint64_t x = t ^ last_;
    return x == 0 ? 0 : 64 - static_cast<unsigned>(__builtin_clzll(x));
  }
  void refill();
  [[noreturn]] void past(SimTimeNs time_ns) const;

  std::array<std::vector<Event>, 65> buckets_;
  size_t head_ = 0;         // events of bucket 0 already popped
  uint64_t nonempty_ = 0;   // bit i-1: bucket i (1..64) holds events
  uint64_t last_ = 0;       // the time of bucket 0's events
  size_t size_ = 0;
  uint64_t next_seq_ = 0;
};

}  // namespace rdmad::sim
