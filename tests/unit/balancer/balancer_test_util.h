#pragma once
// Drives a Balancer with simulated paths: each chunk completes after bytes / path rate, so the
// balancer's weights come only from what it measures.
#include <cstdint>
#include <vector>

#include "rdmad/balancer/balancer.h"

namespace rdmad::balancer::test {

inline std::vector<NicSpec> lanes(size_t n) {
  std::vector<NicSpec> out;
  for (size_t i = 0; i < n; ++i) out.push_back({"nic" + std::to_string(i)});
  return out;
}

/// Sends `messages` messages of `bytes` each; every chunk completes at once with a duration of
/// bytes / rate_bytes_per_s[nic], ±10% deterministic jitter. Returns the bytes each lane carried.
inline std::vector<uint64_t> run(Balancer& b, const std::vector<double>& rate_bytes_per_s, int messages,
                                 uint64_t bytes, uint64_t* now_us) {
  std::vector<uint64_t> carried(b.lane_count(), 0);
  std::vector<Chunk> chunks;
  uint32_t x = 12345;
  for (int m = 0; m < messages; ++m) {
    chunks.clear();
    if (b.plan({.tag = static_cast<uint64_t>(m), .flow_id = 7, .bytes = bytes}, *now_us, chunks) != PlanStatus::kOk) {
      break;
    }
    for (const Chunk& c : chunks) {
      x = x * 1664525u + 1013904223u;
      const double jitter = 0.9 + 0.2 * (x >> 8) / double(1u << 24);
      const auto us = static_cast<uint64_t>(c.bytes / rate_bytes_per_s[c.nic] * 1e6 * jitter);
      b.complete(c.id, us);
      carried[c.nic] += c.bytes;
    }
    *now_us += 1000;
  }
  return carried;
}

inline double share(const std::vector<uint64_t>& carried, size_t i) {
  uint64_t total = 0;
  for (uint64_t c : carried) total += c;
  return total ? static_cast<double>(carried[i]) / static_cast<double>(total) : 0;
}

}  // namespace rdmad::balancer::test
