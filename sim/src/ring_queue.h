#pragma once
// FIFO of packet/flow indices on a power-of-two ring that grows when full (amortised; steady state
// never allocates).
#include <cstdint>
#include <vector>

namespace rdmad::sim {

class RingQueue {
 public:
  bool empty() const { return head_ == tail_; }
  uint32_t size() const { return tail_ - head_; }
  uint32_t front() const { return buf_[head_ & mask_]; }
  void push(uint32_t v) {
    if (size() == buf_.size()) grow();
    buf_[tail_++ & mask_] = v;
  }
  uint32_t pop() { return buf_[head_++ & mask_]; }

 private:
  void grow() {
    std::vector<uint32_t> next(buf_.empty() ? 8 : buf_.size() * 2);
    for (uint32_t i = 0; i < size(); ++i) next[i] = buf_[(head_ + i) & mask_];
    tail_ = size();
    head_ = 0;
    buf_.swap(next);
    mask_ = static_cast<uint32_t>(buf_.size() - 1);
  }
  std::vector<uint32_t> buf_;
  uint32_t head_ = 0;
  uint32_t tail_ = 0;
  uint32_t mask_ = 0;
};

}  // namespace rdmad::sim
