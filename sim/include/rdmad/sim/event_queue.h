#pragma once
// Discrete-event core: a binary min-heap of small fixed-size events ordered by (time, insertion
// sequence). The sequence number makes ties deterministic, so a run depends only on its seed.
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
  // Schedules an event; events at equal times run in scheduling order.
  void push(SimTimeNs time_ns, EventKind kind, uint32_t a, uint32_t b = 0);
  // Removes and returns the earliest event; the queue must not be empty.
  Event pop();
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  SimTimeNs next_time() const { return heap_.front().time_ns; }
  void reserve(size_t n) { heap_.reserve(n); }

 private:
  // One 128-bit comparison instead of two branches: (time, seq) as a single unsigned key.
  __extension__ using Key = unsigned __int128;
  static Key key(const Event& e) {
    return (static_cast<Key>(static_cast<uint64_t>(e.time_ns)) << 64) | e.seq;
  }
  static bool before(const Event& x, const Event& y) { return key(x) < key(y); }
  void sift_up(size_t i, const Event& ev);
  std::vector<Event> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace rdmad::sim
