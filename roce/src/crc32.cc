#include "rdmad/roce/crc32.h"

#include <array>
#include <bit>
#include <cstring>

#include "rdmad/roce/crc32_impl.h"

namespace rdmad::roce {
namespace {

constexpr uint32_t kPoly = 0xEDB88320u;  // reflected 0x04C11DB7 (IEEE 802.3, zlib)

using Tables = std::array<std::array<uint32_t, 256>, 8>;

// Slicing-by-8 (Kounavis & Berry, Intel 2005): table k advances a byte k positions further.
constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int b = 0; b < 8; ++b) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (size_t k = 1; k < 8; ++k) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
  }
  return t;
}

constexpr Tables kTables = make_tables();
static_assert(kTables[0][1] == 0x77073096u, "CRC-32 table entry 1 (zlib crc_table[1])");

using UpdateFn = uint32_t (*)(uint32_t, std::span<const uint8_t>);

UpdateFn update_fn(crc32_impl::Kind kind) {
  switch (kind) {
    case crc32_impl::Kind::kVpclmul:
      return crc32_impl::update_vpclmul;
    case crc32_impl::Kind::kPclmul:
      return crc32_impl::update_pclmul;
    case crc32_impl::Kind::kPortable:
      break;
  }
  return crc32_impl::update_portable;
}

}  // namespace

uint32_t crc32_update(uint32_t crc, std::span<const uint8_t> data) {
  static const UpdateFn fn = update_fn(crc32_impl::selected());
  return fn(crc, data);
}

namespace crc32_impl {

Kind selected() {
  if (vpclmul_supported()) return Kind::kVpclmul;
  if (pclmul_supported()) return Kind::kPclmul;
  return Kind::kPortable;
}

const char* name(Kind kind) {
  switch (kind) {
    case Kind::kVpclmul:
      return "vpclmulqdq-avx512";
    case Kind::kPclmul:
      return "pclmulqdq";
    case Kind::kPortable:
      break;
  }
  return "slicing-by-8";
}

uint32_t update_portable(uint32_t crc, std::span<const uint8_t> data) {
  uint32_t c = ~crc;
  const uint8_t* p = data.data();
  size_t n = data.size();
  while (n >= 8) {
    uint32_t lo;
    uint32_t hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    if constexpr (std::endian::native == std::endian::big) {
      lo = __builtin_bswap32(lo);
      hi = __builtin_bswap32(hi);
    }
    lo ^= c;
    c = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^ kTables[5][(lo >> 16) & 0xFF] ^
        kTables[4][lo >> 24] ^ kTables[3][hi & 0xFF] ^ kTables[2][(hi >> 8) & 0xFF] ^
        kTables[1][(hi >> 16) & 0xFF] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xFF];
  return ~c;
}

}  // namespace crc32_impl

namespace {

// a·b modulo the polynomial, in the reflected representation (bit 31 is x^0); zlib's multmodp.
uint32_t mult_mod_p(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t m = 1u << 31; m != 0; m >>= 1) {
    if (a & m) {
      product ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;
  }
  return product;
}

// x^(8·n) modulo the polynomial, by squarings of x^8.
uint32_t x8n_mod_p(uint64_t n) {
  uint32_t power = 1u << 23;  // x^8
  uint32_t result = 1u << 31;  // x^0
  for (; n != 0; n >>= 1) {
    if (n & 1) result = mult_mod_p(power, result);
    power = mult_mod_p(power, power);
  }
  return result;
}

}  // namespace

Crc32Shift::Crc32Shift(uint64_t len_b) : len_(len_b) {
  const uint32_t shift = x8n_mod_p(len_b);
  for (uint32_t k = 0; k < 4; ++k) {
    for (uint32_t b = 0; b < 256; ++b) t_[k][b] = mult_mod_p(shift, b << (8 * k));
  }
}

namespace {

// The multiplicative order of x modulo the polynomial: 2^32 - 1 (the polynomial is primitive), so
// x^(-k) = x^(kOrder - k). tests/unit/roce/icrc_ip_id_test.cc checks x^(8·kOrder) = 1.
constexpr uint64_t kOrder = 0xFFFFFFFFull;

// Table entry i's top byte names i: the top bytes of the 256 entries are all different (what CRC
// reversal relies on; the build fails if they were not).
constexpr std::array<uint8_t, 256> make_top_index() {
  std::array<uint8_t, 256> top{};
  std::array<bool, 256> seen{};
  for (uint32_t i = 0; i < 256; ++i) {
    const uint32_t t = kTables[0][i] >> 24;
    if (seen[t]) throw "two table entries share a top byte";  // not a constant expression: fails the build
    seen[t] = true;
    top[t] = static_cast<uint8_t>(i);
  }
  return top;
}

constexpr std::array<uint8_t, 256> kTopIndex = make_top_index();

// x^(-8·n): a few lengths per thread (a peer's packets mostly share one: the path MTU's).
uint32_t inverse_shift(uint64_t n) {
  struct Cache {
    uint64_t length[16] = {UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX,
                           UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX,
                           UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX};
    uint32_t value[16] = {};
  };
  thread_local Cache cache;
  const size_t slot = n % 16;
  if (cache.length[slot] != n) {
    cache.value[slot] = x8n_mod_p(kOrder - n % kOrder);
    cache.length[slot] = n;
  }
  return cache.value[slot];
}

}  // namespace

std::optional<uint16_t> crc32_solve_be16(uint32_t delta, uint64_t bytes_after) {
  // The register the two bytes (a, b) leave when fed to a zero register: T[a] >> 8 ^ T[j] with
  // j = (T[a] ^ b) & 0xFF. T[j]'s top byte names j; what is left must be T[a] >> 8.
  const uint32_t reg = mult_mod_p(inverse_shift(bytes_after), delta);
  const uint8_t j = kTopIndex[reg >> 24];
  const uint32_t rest = reg ^ kTables[0][j];
  if ((rest >> 24) != 0) return std::nullopt;
  const uint8_t a = kTopIndex[(rest >> 16) & 0xFF];
  if ((kTables[0][a] >> 8) != rest) return std::nullopt;
  const auto b = static_cast<uint8_t>(j ^ (kTables[0][a] & 0xFF));
  return static_cast<uint16_t>(a << 8 | b);
}

uint32_t crc32_bitwise_for_test(uint32_t crc, std::span<const uint8_t> data) {
  uint32_t c = ~crc;
  for (uint8_t byte : data) {
    c ^= byte;
    for (int b = 0; b < 8; ++b) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
  }
  return ~c;
}

}  // namespace rdmad::roce
