#include "rdmad/base/log_limiter.h"

namespace rdmad::base {

bool LogLimiter::allow(Clock::time_point now, uint64_t* suppressed) {
  std::lock_guard lock(mu_);
  if (in_window_ == 0 || now - window_start_ >= interval_) {
    window_start_ = now;
    in_window_ = 0;
  }
  if (in_window_ >= burst_) {
    ++pending_;
    ++total_;
    return false;
  }
  ++in_window_;
  *suppressed = pending_;
  pending_ = 0;
  return true;
}

uint64_t LogLimiter::suppressed_total() const {
  std::lock_guard lock(mu_);
  return total_;
}

}  // namespace rdmad::base
