#pragma once
#include <cstdint>
#include <string_view>

namespace rdmad::balancer {

// splitmix64: a fixed, well-mixed hash (rendezvous scores, lane salts).
inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// FNV-1a, mixed: a lane's salt from its name, so a flow keeps its lane across restarts.
inline uint64_t name_hash(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  return mix64(h);
}

}  // namespace rdmad::balancer
