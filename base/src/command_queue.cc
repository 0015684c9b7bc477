#include "rdmad/base/command_queue.h"

#include <utility>

#include "rdmad/base/assert.h"

namespace rdmad::base {

CommandQueue::CommandQueue(size_t capacity, std::function<void()> wake)
    : capacity_(capacity), wake_(std::move(wake)), ring_(capacity) {
  RDMAD_ASSERT(capacity > 0, "a command queue needs room for one command");
}

void CommandQueue::run_sync(const std::function<void()>& fn) {
  if (consumer_.load(std::memory_order_acquire) == std::this_thread::get_id()) {
    fn();
    return;
  }
  Slot slot{&fn};
  {
    std::unique_lock lock(mu_);
    room_.wait(lock, [&] { return !attached_ || pending_.load(std::memory_order_relaxed) < capacity_; });
    if (!attached_) {
      lock.unlock();
      fn();
      return;
    }
    ring_[(head_ + pending_.load(std::memory_order_relaxed)) % capacity_] = &slot;
    pending_.fetch_add(1, std::memory_order_release);
  }
  if (wake_) wake_();
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] { return slot.done; });
}

bool CommandQueue::run_next() {
  Slot* slot = nullptr;
  {
    std::lock_guard lock(mu_);
    if (pending_.load(std::memory_order_relaxed) == 0) return false;
    slot = ring_[head_];
    head_ = (head_ + 1) % capacity_;
    pending_.fetch_sub(1, std::memory_order_relaxed);
  }
  room_.notify_one();
  (*slot->fn)();
  {
    std::lock_guard lock(mu_);
    slot->done = true;  // the slot lives on the producer's stack: not touched after this
  }
  done_.notify_all();
  return true;
}

bool CommandQueue::drain() {
  if (pending_.load(std::memory_order_acquire) == 0) return false;
  bool any = false;
  while (run_next()) any = true;
  return any;
}

void CommandQueue::attach(std::thread::id consumer) {
  std::lock_guard lock(mu_);
  attached_ = true;
  consumer_.store(consumer, std::memory_order_release);
}

void CommandQueue::detach() {
  {
    std::lock_guard lock(mu_);
    attached_ = false;
    consumer_.store(std::thread::id{}, std::memory_order_release);
  }
  room_.notify_all();
  while (run_next()) {
  }
}

}  // namespace rdmad::base
