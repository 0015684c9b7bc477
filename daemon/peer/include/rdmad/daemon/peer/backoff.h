#pragma once
// Reconnect delays: exponential from min to max, with jitter so that daemons that lost a peer at
// the same moment do not all redial it in lock-step. Deterministic for a given seed.
#include <chrono>
#include <cstdint>
#include <random>

namespace rdmad::peer {

class Backoff {
 public:
  /// jitter in [0, 1]: each delay is drawn uniformly from [d·(1−jitter), d].
  Backoff(std::chrono::milliseconds min, std::chrono::milliseconds max, double jitter, uint64_t seed);
  /// The delay before the next attempt; doubles the base for the one after (up to max).
  std::chrono::milliseconds next();
  /// After a success: the next delay starts again from min.
  void reset() { base_ = min_; }
  std::chrono::milliseconds base() const { return base_; }

 private:
  std::chrono::milliseconds min_;
  std::chrono::milliseconds max_;
  std::chrono::milliseconds base_;
  double jitter_;
  std::mt19937_64 rng_;
};

}  // namespace rdmad::peer
