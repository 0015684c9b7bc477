#include "rdmad/daemon/peer/backoff.h"

#include <algorithm>

namespace rdmad::peer {

Backoff::Backoff(std::chrono::milliseconds min, std::chrono::milliseconds max, double jitter, uint64_t seed)
    : min_(std::max(min, std::chrono::milliseconds(1))),
      max_(std::max(max, min_)),
      base_(min_),
      jitter_(std::clamp(jitter, 0.0, 1.0)),
      rng_(seed) {}

std::chrono::milliseconds Backoff::next() {
  const auto d = static_cast<double>(base_.count());
  std::uniform_real_distribution<double> u(d * (1.0 - jitter_), d);
  const auto out = std::chrono::milliseconds(std::max<int64_t>(1, static_cast<int64_t>(u(rng_))));
  base_ = std::min(max_, base_ * 2);
  return out;
}

}  // namespace rdmad::peer
