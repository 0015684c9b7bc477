#pragma once
// RED-style ECN marking at a switch egress queue (DCQCN's congestion point, SIGCOMM'15 §3.1):
// q ≤ Kmin: never; Kmin < q ≤ Kmax: with probability Pmax·(q − Kmin)/(Kmax − Kmin); q > Kmax: always.
//
// Callers should decide at DEQUEUE, from the egress queue's byte count when the packet leaves
// (including the leaving packet): the mark then reflects the queue the packet actually waited
// behind and reaches the receiver one queueing delay earlier than an enqueue-time mark, which
// shortens the control loop (the DCQCN authors' switch marks at egress). Marking at enqueue
// works with the same object; the simulator documents which one it uses.
#include <concepts>
#include <cstdint>
#include <utility>

namespace rdmad::cc {

struct RedParams {
  uint64_t kmin_bytes = 0;  // no marking at or below this queue length
  uint64_t kmax_bytes = 0;  // every packet marked above this queue length
  double pmax = 0;          // marking probability just below Kmax (0..1)

  bool operator==(const RedParams&) const = default;
};

// SIGCOMM'15 §5 settings: Kmin 5 KB, Kmax 200 KB, Pmax 1% (KB = 1000 bytes).
inline constexpr RedParams kRedPaper{5'000, 200'000, 0.01};

// A common production setting: 100 KB / 400 KB per 25 Gb/s of port speed, Pmax 20%.
constexpr RedParams red_production(double port_gbps) {
  const double scale = port_gbps / 25.0;
  return RedParams{static_cast<uint64_t>(100'000 * scale), static_cast<uint64_t>(400'000 * scale), 0.20};
}

// SplitMix64 turned into uniform doubles in [0, 1): small, fast, good enough for marking decisions,
// and deterministic for a given seed (the simulator relies on that).
class SplitMixUniform {
 public:
  explicit SplitMixUniform(uint64_t seed) : state_(seed) {}
  double operator()() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  }

 private:
  uint64_t state_;
};

// `Uniform` is any callable returning a double in [0, 1) (inject a fixed sequence in tests).
template <typename Uniform>
class BasicRedMarker {
 public:
  BasicRedMarker(RedParams params, Uniform uniform) : params_(params), uniform_(std::move(uniform)) {}
  BasicRedMarker(RedParams params, uint64_t seed) requires std::constructible_from<Uniform, uint64_t>
      : params_(params), uniform_(seed) {}

  // Marking probability at this queue length (0 at or below Kmin, 1 above Kmax).
  double probability(uint64_t queue_bytes) const {
    if (queue_bytes <= params_.kmin_bytes) return 0.0;
    if (queue_bytes > params_.kmax_bytes) return 1.0;
    return params_.pmax * static_cast<double>(queue_bytes - params_.kmin_bytes) /
           static_cast<double>(params_.kmax_bytes - params_.kmin_bytes);
  }

  // Draws the marking decision for one packet. The RNG is consumed only between Kmin and Kmax, so
  // an unloaded queue does not perturb the random stream.
  bool should_mark(uint64_t queue_bytes) {
    if (queue_bytes <= params_.kmin_bytes) return false;
    if (queue_bytes > params_.kmax_bytes) return true;
    return uniform_() < probability(queue_bytes);
  }

  const RedParams& params() const { return params_; }

 private:
  RedParams params_;
  Uniform uniform_;
};

using RedMarker = BasicRedMarker<SplitMixUniform>;

}  // namespace rdmad::cc
