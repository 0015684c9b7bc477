#pragma once
// The implementations behind crc32_update() and the constants of the carry-less-multiply one,
// exposed so that tests and benchmarks can run every implementation on any CPU and check the
// constants against a bitwise computation. Production code calls crc32_update() only.
#include <cstddef>
#include <cstdint>
#include <span>

namespace rdmad::roce::crc32_impl {

// Slicing-by-8 (Kounavis & Berry, Intel 2005); runs everywhere. Same contract as crc32_update().
uint32_t update_portable(uint32_t crc, std::span<const uint8_t> data);

// True when the CPU has PCLMULQDQ and SSE4.1 (always false off x86-64).
bool pclmul_supported();
// Folds 4x128 bits per step with PCLMULQDQ; any length. Call only when pclmul_supported().
uint32_t update_pclmul(uint32_t crc, std::span<const uint8_t> data);

// True when the CPU also has AVX-512 (F, VL, BW) and VPCLMULQDQ (always false off x86-64).
bool vpclmul_supported();
// Folds 4x512 bits per step with VPCLMULQDQ; any length. Call only when vpclmul_supported().
uint32_t update_vpclmul(uint32_t crc, std::span<const uint8_t> data);

enum class Kind : uint8_t { kPortable, kPclmul, kVpclmul };

// The implementation crc32_update() uses on this CPU, chosen once: the widest one supported.
Kind selected();
// A short name for logs and benchmark output ("slicing-by-8", "pclmulqdq", "vpclmulqdq-avx512").
const char* name(Kind kind);

// Below this many bytes the folding implementations hand over to update_portable(): folding needs
// one whole 16-byte block, and from there on it is already faster (3.7 ns vs 5.0 ns at 16 bytes).
inline constexpr size_t kFoldMinBytes = 16;

// --- Folding constants (Gopal et al., "Fast CRC Computation for Generic Polynomials Using
// PCLMULQDQ Instruction", Intel 2009), for P = x^32 + 0x04C11DB7 in the reflected bit order.
//
// A 128-bit register holds 16 message bytes; with the reflected order its bit k is the coefficient
// of x^(127-k) (byte 0, bit 0 is the highest degree). PCLMULQDQ of two 64-bit halves, a (bit i =
// coefficient of x^(63-i)) and a constant c, yields bit i+j from a_i*c_j. If the constant's bit j is
// the coefficient of x^(s-j), the 128-bit product is x^(64-s) * A * K. Two encodings are used:
//  - fold_constant(n): s = 32 (reflect(K) << 1, a 33-bit value): product = x^32 * A * K. Folding a
//    64-bit half A forward by D bits needs A * x^(D+64) (the high-degree half) or A * x^D (the low
//    one), so the pair is K = x^(D+32) mod P and x^(D-32) mod P. These are the values of the Linux
//    kernel's crc32-pclmul tables, which the static_asserts below check.
//  - reduce_constant(n): s = 63 (reflect(K) << 32): product = x * A * K, of degree below 96, so it
//    lands in the low-degree 96 bits of the register. The final reduction uses K = x^95 mod P
//    (128 -> 96 bits) and K = x^63 mod P (96 -> 64 bits), then Barrett reduction (64 -> 32 bits)
//    with mu = floor(x^64 / P) and P, both reflected as 33-bit values.

// x^n mod P as an ordinary polynomial (bit d = coefficient of x^d), one bit per step.
constexpr uint32_t xn_mod_p(unsigned n) {
  uint32_t r = 1;
  for (unsigned i = 0; i < n; ++i) r = (r & 0x80000000u) ? (r << 1) ^ 0x04C11DB7u : r << 1;
  return r;
}

// The low `bits` bits of v in reverse order.
constexpr uint64_t reflect(uint64_t v, unsigned bits) {
  uint64_t r = 0;
  for (unsigned i = 0; i < bits; ++i) r |= ((v >> i) & 1) << (bits - 1 - i);
  return r;
}

// x^n mod P in the two encodings described above.
constexpr uint64_t fold_constant(unsigned n) { return reflect(xn_mod_p(n), 32) << 1; }
constexpr uint64_t reduce_constant(unsigned n) { return reflect(xn_mod_p(n), 32) << 32; }

// floor(x^64 / P), degree 32, by long division: the Barrett constant mu.
constexpr uint64_t barrett_mu() {
  constexpr uint64_t kP = 0x104C11DB7u;
  uint64_t rem = 0;
  uint64_t q = 0;
  for (int i = 64; i >= 0; --i) {
    rem = (rem << 1) | (i == 64 ? 1 : 0);
    if (rem >> 32) {
      q |= uint64_t{1} << i;
      rem ^= kP;
    }
  }
  return q;
}

inline constexpr uint64_t kPolyReflected33 = reflect(0x104C11DB7u, 33);  // P' = 0x1DB710641
inline constexpr uint64_t kMuReflected33 = reflect(barrett_mu(), 33);    // mu' = 0x1F7011641

static_assert(fold_constant(4 * 128 + 32) == 0x154442BD4u, "Linux crc32-pclmul R1");
static_assert(fold_constant(4 * 128 - 32) == 0x1C6E41596u, "Linux crc32-pclmul R2");
static_assert(fold_constant(128 + 32) == 0x1751997D0u, "Linux crc32-pclmul R3");
static_assert(fold_constant(128 - 32) == 0x0CCAA009Eu, "Linux crc32-pclmul R4");
static_assert(kPolyReflected33 == 0x1DB710641u && kMuReflected33 == 0x1F7011641u,
              "Linux crc32-pclmul RUpoly");

}  // namespace rdmad::roce::crc32_impl
