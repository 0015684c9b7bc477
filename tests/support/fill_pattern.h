#pragma once
// A data pattern that differs per 8-byte word and per seed (xorshift), so a misplaced, repeated or
// missing chunk of a transfer shows in a byte comparison. Header-only and free of GoogleTest so
// benchmarks that verify their transfers use it too.
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rdmad::test {

inline void fill(uint8_t* p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n / 8; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(p + i * 8, &x, 8);
  }
}

}  // namespace rdmad::test
