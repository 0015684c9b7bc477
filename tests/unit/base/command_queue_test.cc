#include "rdmad/base/command_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace rdmad::base {
namespace {

// A consumer thread that drains until told to stop, as a datapath loop does.
class Consumer {
 public:
  explicit Consumer(CommandQueue& q) : q_(q) {
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        if (!q_.drain()) std::this_thread::yield();
      }
    });
    q_.attach(thread_.get_id());
  }
  ~Consumer() { stop(); }
  void stop() {
    if (!thread_.joinable()) return;
    stop_ = true;
    thread_.join();
    q_.detach();
  }
  std::thread::id id() const { return thread_.get_id(); }

 private:
  CommandQueue& q_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(BaseCommandQueue, CommandsRunOnTheConsumerThreadAndTheCallerWaitsForThem) {
  std::atomic<int> wakes{0};
  CommandQueue q(4, [&] { ++wakes; });
  Consumer c(q);
  std::thread::id ran_on;
  int value = 0;
  q.run_sync([&] {
    ran_on = std::this_thread::get_id();
    value = 42;
  });
  EXPECT_EQ(ran_on, c.id());
  EXPECT_EQ(value, 42);  // visible at return: the caller waited
  EXPECT_GE(wakes.load(), 1);
}

TEST(BaseCommandQueue, DetachedQueueRunsCommandsOnTheCaller) {
  CommandQueue q(1, {});
  std::thread::id ran_on;
  q.run_sync([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(BaseCommandQueue, ACommandFromTheConsumerItselfRunsAtOnce) {
  CommandQueue q(1, {});
  Consumer c(q);
  bool inner = false;
  q.run_sync([&] { q.run_sync([&] { inner = true; }); });  // would deadlock if queued
  EXPECT_TRUE(inner);
}

// Many producers through a queue of two: every command runs exactly once, and producers block for
// room instead of overrunning the ring.
TEST(BaseCommandQueue, BoundedQueueServesManyProducersExactlyOnce) {
  CommandQueue q(2, {});
  Consumer c(q);
  std::atomic<size_t> max_queued{0};
  std::vector<int> counts(8 * 200, 0);  // touched only on the consumer thread
  std::vector<std::thread> producers;
  for (int p = 0; p < 8; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < 200; ++i) {
        q.run_sync([&, p, i] {
          ++counts[p * 200 + i];
          max_queued = std::max(max_queued.load(), q.queued());
        });
      }
    });
  }
  for (auto& t : producers) t.join();
  for (int n : counts) ASSERT_EQ(n, 1);
  EXPECT_LE(max_queued.load(), 2u);
}

// A consumer that stopped with commands still queued: detach() runs them, so no producer hangs.
TEST(BaseCommandQueue, DetachRunsWhatTheStoppedConsumerLeftQueued) {
  CommandQueue q(4, {});
  std::atomic<bool> stop{false};
  std::thread consumer([&] {
    while (!stop.load()) std::this_thread::yield();  // never drains
  });
  q.attach(consumer.get_id());
  std::atomic<bool> ran{false};
  std::thread producer([&] { q.run_sync([&] { ran = true; }); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (q.queued() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  ASSERT_EQ(q.queued(), 1u);
  EXPECT_FALSE(ran.load());
  stop = true;
  consumer.join();
  q.detach();
  producer.join();
  EXPECT_TRUE(ran.load());
  bool after = false;
  q.run_sync([&] { after = true; });  // detached again: runs on the caller
  EXPECT_TRUE(after);
}

}  // namespace
}  // namespace rdmad::base
