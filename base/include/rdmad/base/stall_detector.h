#pragma once
// Which threads are stalled: busy inside one pass, their heartbeat (heartbeat.h) unchanged, for
// longer than a threshold. A thread that is idle (waiting for work) is never stalled, however long
// it waits; one whose heartbeat changes is making progress. Time is a parameter (a manual clock in
// tests); the daemon checks on its watchdog timer and stops pinging systemd while any thread is
// stalled (docs/operations.md, "Watchdog").
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "rdmad/base/heartbeat.h"

namespace rdmad::base {

class StallDetector {
 public:
  using Duration = std::chrono::nanoseconds;
  using TimePoint = std::chrono::steady_clock::time_point;

  /// What a check found about one thread.
  struct ThreadState {
    std::string name;
    bool stalled = false;
    Duration busy_without_progress{0};  // 0 while idle or progressing
  };

  explicit StallDetector(Duration threshold) : threshold_(threshold) {}

  /// Watches `heartbeat` (which must outlive the detector or its remove()) under `name`.
  void add(std::string name, const Heartbeat* heartbeat, TimePoint now);
  /// Stops watching the threads named `name`.
  void remove(const std::string& name);

  /// Reads every heartbeat at `now`; returns every thread's state, in the order added.
  const std::vector<ThreadState>& check(TimePoint now);
  /// Whether the last check found any thread stalled.
  bool any_stalled() const;
  /// The last check's states.
  const std::vector<ThreadState>& states() const { return states_; }
  Duration threshold() const { return threshold_; }

 private:
  struct Watched {
    const Heartbeat* heartbeat;
    uint64_t last_word;
    TimePoint last_change;  // when a check last saw the word change (or the thread was added)
  };
  Duration threshold_;
  std::vector<Watched> watched_;
  std::vector<ThreadState> states_;  // parallel to watched_
};

}  // namespace rdmad::base
