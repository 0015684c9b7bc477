#pragma once
// Bounded single-producer single-consumer ring. The consumer may look at any readable entry before
// releasing it (the send and receive queues keep work requests in the ring until they complete).
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace rdmad::verbs::engine {

template <class T>
class SpscRing {
 public:
  explicit SpscRing(size_t min_capacity)
      : capacity_(std::bit_ceil(min_capacity < 2 ? size_t{2} : min_capacity)),
        mask_(capacity_ - 1),
        slots_(std::make_unique<T[]>(capacity_)) {}

  size_t capacity() const { return capacity_; }

  // ---- producer ----
  /// False when full.
  bool push(const T& v) {
    uint64_t t = tail_.load(std::memory_order_relaxed);
    if (t - head_.load(std::memory_order_acquire) >= capacity_) return false;
    slots_[t & mask_] = v;
    tail_.store(t + 1, std::memory_order_release);
    return true;
  }
  /// Absolute index the next push takes.
  uint64_t producer_tail() const { return tail_.load(std::memory_order_relaxed); }
  /// Free slots as seen by the producer.
  size_t free_slots() const {
    return capacity_ - (tail_.load(std::memory_order_relaxed) - head_.load(std::memory_order_acquire));
  }

  // ---- consumer ----
  /// Absolute index of the oldest entry.
  uint64_t head() const { return head_.load(std::memory_order_relaxed); }
  /// Absolute index one past the newest published entry.
  uint64_t tail() const { return tail_.load(std::memory_order_acquire); }
  /// Entry at absolute index i, head() <= i < tail().
  T& at(uint64_t i) { return slots_[i & mask_]; }
  size_t slot(uint64_t i) const { return static_cast<size_t>(i & mask_); }
  bool pop(T* out) {
    uint64_t h = head_.load(std::memory_order_relaxed);
    if (h == tail_.load(std::memory_order_acquire)) return false;
    *out = slots_[h & mask_];
    head_.store(h + 1, std::memory_order_release);
    return true;
  }
  /// Releases the oldest entry.
  void release() { head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
  bool empty() const { return head() == tail(); }

 private:
  const size_t capacity_;
  const size_t mask_;
  std::unique_ptr<T[]> slots_;
  alignas(64) std::atomic<uint64_t> head_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
};

}  // namespace rdmad::verbs::engine
