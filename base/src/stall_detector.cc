#include "rdmad/base/stall_detector.h"

#include <algorithm>

namespace rdmad::base {

void StallDetector::add(std::string name, const Heartbeat* heartbeat, TimePoint now) {
  watched_.push_back({heartbeat, heartbeat->load(std::memory_order_acquire), now});
  states_.push_back({std::move(name), false, Duration{0}});
}

void StallDetector::remove(const std::string& name) {
  for (size_t i = states_.size(); i-- > 0;) {
    if (states_[i].name != name) continue;
    states_.erase(states_.begin() + static_cast<std::ptrdiff_t>(i));
    watched_.erase(watched_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

const std::vector<StallDetector::ThreadState>& StallDetector::check(TimePoint now) {
  for (size_t i = 0; i < watched_.size(); ++i) {
    Watched& w = watched_[i];
    ThreadState& s = states_[i];
    const uint64_t word = w.heartbeat->load(std::memory_order_acquire);
    if (word != w.last_word || !Heartbeat::is_busy(word)) {
      // Progress, or idle by choice: neither is a stall. An idle thread's clock restarts too, so
      // the pass it begins next is measured from when it was last seen waiting, not from before.
      w.last_word = word;
      w.last_change = now;
      s.stalled = false;
      s.busy_without_progress = Duration{0};
      continue;
    }
    s.busy_without_progress = std::max(Duration{0}, std::chrono::duration_cast<Duration>(now - w.last_change));
    s.stalled = s.busy_without_progress > threshold_;
  }
  return states_;
}

bool StallDetector::any_stalled() const {
  return std::any_of(states_.begin(), states_.end(), [](const ThreadState& s) { return s.stalled; });
}

}  // namespace rdmad::base
