// The requests a flow posted whose completion it has not taken yet, kept by the library so that
// when the daemon is gone it can complete each of them itself (RDMAD_ERR_DAEMON_GONE): a request
// the daemon took into its own memory is not in the ring any more, and no one else knows it.
//
// Two queues in posting order: receives (they complete when a send arrives, so out of order with
// the rest) and everything else (in order but for requests refused at once). A completion removes
// the oldest matching live entry; entries removed out of order leave a hole that is skipped, and a
// queue whose holes fill it is compacted, so adding and completing stay O(1) amortized and never
// allocate after setup.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rdmad::client {

class Outstanding {
 public:
  struct Entry {
    uint64_t wr_id = 0;
    uint32_t seq = 0;  // posting order across both queues
    uint8_t op = 0;
    bool live = false;
  };

  // At most `capacity` requests outstanding at once (the flow's sq_depth + cq_depth: the daemon
  // holds no more than cq_depth it took, and the ring the rest).
  void reset(uint32_t capacity, uint8_t recv_op) {
    capacity_ = capacity;
    recv_op_ = recv_op;
    for (Queue* q : {&recv_, &other_}) {
      q->slots.assign(size_t{capacity} * 2, Entry{});
      q->head = q->tail = 0;
    }
    live_ = 0;
  }
  size_t size() const { return live_; }
  bool full() const { return live_ >= capacity_; }

  // After a successful post. The caller checked !full().
  void add(uint8_t op, uint64_t wr_id) {
    Queue& q = queue(op);
    if (q.tail - q.head == q.slots.size()) compact(q);
    q.slots[q.tail++ % q.slots.size()] = Entry{wr_id, next_seq_++, op, true};
    ++live_;
  }

  // A completion came from the daemon. One the library never posted is ignored.
  void complete(uint8_t op, uint64_t wr_id) {
    Queue& q = queue(op);
    for (uint64_t i = q.head; i < q.tail; ++i) {
      Entry& e = q.slots[i % q.slots.size()];
      if (!e.live || e.wr_id != wr_id || e.op != op) continue;
      e.live = false;
      --live_;
      skip_holes(q);
      return;
    }
  }

  // Removes and returns the oldest outstanding request of either queue; false when none.
  bool pop_oldest(Entry* out) {
    skip_holes(recv_);
    skip_holes(other_);
    Queue* q = nullptr;
    const bool have_recv = recv_.head != recv_.tail;
    const bool have_other = other_.head != other_.tail;
    if (have_recv && have_other) {
      const uint32_t a = front(recv_).seq, b = front(other_).seq;
      q = static_cast<int32_t>(a - b) < 0 ? &recv_ : &other_;
    } else if (have_recv) {
      q = &recv_;
    } else if (have_other) {
      q = &other_;
    } else {
      return false;
    }
    Entry& e = front(*q);
    *out = e;
    e.live = false;
    --live_;
    skip_holes(*q);
    return true;
  }

 private:
  struct Queue {
    std::vector<Entry> slots;
    uint64_t head = 0;  // free-running; slot = index % slots.size()
    uint64_t tail = 0;
  };

  Queue& queue(uint8_t op) { return op == recv_op_ ? recv_ : other_; }
  Entry& front(Queue& q) { return q.slots[q.head % q.slots.size()]; }
  void skip_holes(Queue& q) {
    while (q.head != q.tail && !front(q).live) ++q.head;
  }
  // Moves the live entries together in order. Called when holes fill the queue: then at most
  // capacity_ of its 2 * capacity_ slots are live, so a compaction frees at least half of them.
  void compact(Queue& q) {
    uint64_t out = q.head;
    for (uint64_t i = q.head; i < q.tail; ++i) {
      const Entry e = q.slots[i % q.slots.size()];
      if (e.live) q.slots[out++ % q.slots.size()] = e;
    }
    q.tail = out;
  }

  uint32_t capacity_ = 0;
  uint8_t recv_op_ = 0;
  Queue recv_;
  Queue other_;
  size_t live_ = 0;
  uint32_t next_seq_ = 0;
};

}  // namespace rdmad::client
