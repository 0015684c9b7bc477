// CRC-32 by carry-less-multiply folding (Gopal et al., Intel 2009; the technique of the Linux
// kernel's crc32-pclmul and zlib-ng's crc32_fold), then Barrett reduction. The constants and the
// bit layout are explained in rdmad/roce/crc32_impl.h. Only these functions are compiled for
// PCLMULQDQ / VPCLMULQDQ (target attributes); callers check *_supported() first.
#include "rdmad/roce/crc32_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace rdmad::roce::crc32_impl {

#if defined(__x86_64__)

#define RDMAD_TARGET_PCLMUL __attribute__((target("pclmul,sse4.1")))
#define RDMAD_TARGET_VPCLMUL __attribute__((target("pclmul,sse4.1,avx512f,avx512vl,avx512bw,vpclmulqdq")))

namespace {

// Low qword multiplies the high-degree (first) half of a block, high qword the low-degree half.
constexpr uint64_t kFold512[2] = {fold_constant(512 + 32), fold_constant(512 - 32)};
constexpr uint64_t kFold384[2] = {fold_constant(384 + 32), fold_constant(384 - 32)};
constexpr uint64_t kFold256[2] = {fold_constant(256 + 32), fold_constant(256 - 32)};
constexpr uint64_t kFold128[2] = {fold_constant(128 + 32), fold_constant(128 - 32)};
constexpr uint64_t kFold2048[2] = {fold_constant(2048 + 32), fold_constant(2048 - 32)};
// 128 -> 96 bits uses x^95 (low qword), 96 -> 64 bits uses x^63 (high qword).
constexpr uint64_t kReduce[2] = {reduce_constant(95), reduce_constant(63)};
constexpr uint64_t kBarrett[2] = {kPolyReflected33, kMuReflected33};

// pshufb indices: from offset 16-k a shift of k bytes towards the end of the register, from
// offset 16+k a shift of k bytes towards the start; 0x80 entries produce zero bytes.
alignas(16) constexpr uint8_t kShift[48] = {
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0,    1,    2,    3,    4,    5,    6,    7,    8,    9,    10,   11,   12,   13,   14,   15,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};

RDMAD_TARGET_PCLMUL inline __m128i load128(const void* p) {
  return _mm_loadu_si128(static_cast<const __m128i*>(p));
}

// x * x^D + next, with k the constant pair for distance D.
RDMAD_TARGET_PCLMUL inline __m128i fold128(__m128i x, __m128i k, __m128i next) {
  const __m128i hi = _mm_clmulepi64_si128(x, k, 0x00);
  const __m128i lo = _mm_clmulepi64_si128(x, k, 0x11);
  return _mm_xor_si128(_mm_xor_si128(hi, lo), next);
}

// The 128-bit remainder x times x^32 mod P (the CRC register before the final inversion).
RDMAD_TARGET_PCLMUL inline uint32_t reduce(__m128i x) {
  const __m128i k = load128(kReduce);
  // x = H*x^64 + L: x*x^32 == x*H*(x^95 mod P) + L*x^32, below degree 96 (bits 32..127).
  __m128i w = _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_slli_si128(_mm_srli_si128(x, 8), 4));
  // w = G*x^64 + W (G in bits 32..63): G*x^64 == x*G*(x^63 mod P), below degree 64.
  w = _mm_srli_si128(_mm_xor_si128(_mm_clmulepi64_si128(w, k, 0x10), w), 8);
  // Barrett: q = floor(T*mu / x^32) for the high-degree 32 bits T; remainder = W + q*P.
  const __m128i b = load128(kBarrett);
  const __m128i low32 = _mm_cvtsi32_si128(-1);
  __m128i q = _mm_clmulepi64_si128(_mm_and_si128(w, low32), b, 0x10);
  q = _mm_clmulepi64_si128(_mm_and_si128(q, low32), b, 0x00);
  return static_cast<uint32_t>(_mm_extract_epi32(_mm_xor_si128(q, w), 1));
}

// Folds the remaining n bytes at p into x (whole blocks, then a last partial block that borrows
// already-folded bytes from before p, which needs at least 16 bytes folded so far), and reduces.
RDMAD_TARGET_PCLMUL inline uint32_t finish(__m128i x, const uint8_t* p, size_t n) {
  const __m128i k = load128(kFold128);
  for (; n >= 16; p += 16, n -= 16) x = fold128(x, k, load128(p));
  if (n > 0) {
    // The last 16 + n bytes are x followed by the n tail bytes: x's first n bytes become a block
    // of their own (folded by 128 bits), its other 16 - n bytes plus the tail the final block.
    const __m128i to_end = load128(kShift + n);
    const __m128i to_start = load128(kShift + 16 + n);
    const __m128i head = _mm_shuffle_epi8(x, to_end);
    const __m128i last = _mm_blendv_epi8(_mm_shuffle_epi8(x, to_start), load128(p + n - 16), to_start);
    x = fold128(head, k, last);
  }
  return ~reduce(x);
}

RDMAD_TARGET_PCLMUL uint32_t fold_pclmul(uint32_t crc, const uint8_t* p, size_t n) {
  __m128i x0 = _mm_xor_si128(load128(p), _mm_cvtsi32_si128(static_cast<int>(~crc)));
  if (n < 64) return finish(x0, p + 16, n - 16);
  __m128i x1 = load128(p + 16);
  __m128i x2 = load128(p + 32);
  __m128i x3 = load128(p + 48);
  p += 64;
  n -= 64;
  const __m128i k4 = load128(kFold512);
  for (; n >= 64; p += 64, n -= 64) {
    x0 = fold128(x0, k4, load128(p));
    x1 = fold128(x1, k4, load128(p + 16));
    x2 = fold128(x2, k4, load128(p + 32));
    x3 = fold128(x3, k4, load128(p + 48));
  }
  const __m128i k1 = load128(kFold128);
  x0 = fold128(fold128(fold128(x0, k1, x1), k1, x2), k1, x3);
  return finish(x0, p, n);
}

RDMAD_TARGET_VPCLMUL inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }

// The masked forms of broadcast and extract: the unmasked ones pass GCC 12 an "undefined" source
// operand that -Wuninitialized reports.
RDMAD_TARGET_VPCLMUL inline __m512i broadcast(const uint64_t (&k)[2]) {
  return _mm512_maskz_broadcast_i32x4(0xFFFF, load128(k));
}

template <int kLane>
RDMAD_TARGET_VPCLMUL inline __m128i lane(__m512i z) {
  return _mm512_maskz_extracti32x4_epi32(0xF, z, kLane);
}

// Four independent 128-bit lanes folded at once.
RDMAD_TARGET_VPCLMUL inline __m512i fold512(__m512i z, __m512i k, __m512i next) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(z, k, 0x00), _mm512_clmulepi64_epi128(z, k, 0x11),
                                   next, 0x96);
}

RDMAD_TARGET_VPCLMUL uint32_t fold_vpclmul(uint32_t crc, const uint8_t* p, size_t n) {
  __m512i z0 =
      _mm512_xor_si512(load512(p), _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(~crc))));
  p += 64;
  n -= 64;
  const __m512i k4 = broadcast(kFold512);
  if (n >= 192) {
    __m512i z1 = load512(p);
    __m512i z2 = load512(p + 64);
    __m512i z3 = load512(p + 128);
    p += 192;
    n -= 192;
    const __m512i k16 = broadcast(kFold2048);
    for (; n >= 256; p += 256, n -= 256) {
      z0 = fold512(z0, k16, load512(p));
      z1 = fold512(z1, k16, load512(p + 64));
      z2 = fold512(z2, k16, load512(p + 128));
      z3 = fold512(z3, k16, load512(p + 192));
    }
    z0 = fold512(fold512(fold512(z0, k4, z1), k4, z2), k4, z3);
  }
  for (; n >= 64; p += 64, n -= 64) z0 = fold512(z0, k4, load512(p));
  // Lanes 0..2 are 48, 32 and 16 bytes ahead of lane 3; lane 3's zero constants drop its product.
  const __m512i k =
      _mm512_inserti32x4(_mm512_inserti32x4(_mm512_zextsi128_si512(load128(kFold384)), load128(kFold256), 1),
                         load128(kFold128), 2);
  const __m512i t = fold512(z0, k, _mm512_setzero_si512());
  const __m128i x =
      _mm_xor_si128(_mm_xor_si128(lane<0>(t), lane<1>(t)), _mm_xor_si128(lane<2>(t), lane<3>(z0)));
  return finish(x, p, n);
}

}  // namespace

bool pclmul_supported() {
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  }();
  return supported;
}

bool vpclmul_supported() {
  static const bool supported = pclmul_supported() && __builtin_cpu_supports("avx512f") &&
                                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("vpclmulqdq");
  return supported;
}

uint32_t update_pclmul(uint32_t crc, std::span<const uint8_t> data) {
  if (data.size() < kFoldMinBytes) return update_portable(crc, data);
  return fold_pclmul(crc, data.data(), data.size());
}

uint32_t update_vpclmul(uint32_t crc, std::span<const uint8_t> data) {
  if (data.size() < 64) return update_pclmul(crc, data);
  return fold_vpclmul(crc, data.data(), data.size());
}

#else  // !__x86_64__

bool pclmul_supported() { return false; }
bool vpclmul_supported() { return false; }
uint32_t update_pclmul(uint32_t crc, std::span<const uint8_t> data) { return update_portable(crc, data); }
uint32_t update_vpclmul(uint32_t crc, std::span<const uint8_t> data) { return update_portable(crc, data); }

#endif

}  // namespace rdmad::roce::crc32_impl
