#pragma once
// A small, fully specified PRNG (SplitMix64) so that runs are bit-identical across standard
// libraries; <random> distributions are implementation-defined.
#include <cmath>
#include <cstdint>

namespace rdmad::sim {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n).
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(uniform() * n); }
  // Exponential with the given mean.
  double exponential(double mean) { return -std::log1p(-uniform()) * mean; }

 private:
  uint64_t state_;
};

// Stateless 64-bit mix, for ECMP hashing.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace rdmad::sim
