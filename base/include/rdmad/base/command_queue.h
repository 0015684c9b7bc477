#pragma once
// The one way another thread hands work to a datapath thread (a soft NIC, the flow engine): run a
// command on the consumer thread and wait until it has run. Bounded: `capacity` commands wait at
// once and further producers block until there is room. The consumer's per-pass check is one
// atomic load; it takes the lock only when commands are queued.
//
// Lifecycle: detached (commands run on the calling thread), attach(consumer) once the consumer
// thread exists, detach() after it has been joined: what it left queued runs on the detaching
// thread, and later commands run on their callers again. A command run from the consumer thread
// itself runs at once (no self-deadlock).
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rdmad::base {

class CommandQueue {
 public:
  // `wake` is called (outside the lock) after a command is queued: the consumer's doorbell.
  CommandQueue(size_t capacity, std::function<void()> wake);
  CommandQueue(const CommandQueue&) = delete;
  CommandQueue& operator=(const CommandQueue&) = delete;

  // Any thread: runs `fn` on the consumer thread (or inline, see above) and returns when it has run.
  void run_sync(const std::function<void()>& fn);

  // Consumer thread: runs every queued command; true when at least one ran.
  bool drain();

  void attach(std::thread::id consumer);
  void detach();

  // Commands waiting now (the consumer's check before it sleeps).
  size_t queued() const { return pending_.load(std::memory_order_acquire); }

 private:
  struct Slot {
    const std::function<void()>* fn;
    bool done = false;  // under mu_
  };
  bool run_next();

  const size_t capacity_;
  const std::function<void()> wake_;
  std::atomic<std::thread::id> consumer_{};
  std::atomic<size_t> pending_{0};
  mutable std::mutex mu_;
  std::condition_variable room_;  // a producer waits for room
  std::condition_variable done_;  // a producer waits for its command
  std::vector<Slot*> ring_;  // capacity_ entries; head_ .. head_ + pending_ hold commands
  size_t head_ = 0;
  bool attached_ = false;
};

}  // namespace rdmad::base
