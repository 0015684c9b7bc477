#pragma once
// Time in cc/: signed 64-bit nanoseconds on the caller's clock. Nothing in cc/ reads a clock; every
// function that depends on time takes `now`. The daemon passes a monotonic clock, the simulator its
// simulated time, tests a manual clock.
#include <cstdint>
#include <limits>

namespace rdmad::cc {

using TimeNs = int64_t;

// "No event scheduled": later than any real time.
inline constexpr TimeNs kNever = std::numeric_limits<TimeNs>::max();

inline constexpr TimeNs kNsPerUs = 1000;

constexpr TimeNs us_to_ns(uint64_t us) { return static_cast<TimeNs>(us) * kNsPerUs; }

}  // namespace rdmad::cc
