// Every CRC-32 implementation (forced explicitly, so the fallback stays tested on CPUs that would
// not select it) against the bitwise reference, and the folding constants against x^n mod P
// computed by the bitwise CRC.
#include "rdmad/roce/crc32_impl.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "rdmad/roce/crc32.h"

namespace rdmad::roce {
namespace {

using UpdateFn = uint32_t (*)(uint32_t, std::span<const uint8_t>);

struct Impl {
  const char* name;
  UpdateFn fn;
  bool supported;
};

std::vector<Impl> supported_impls() {
  std::vector<Impl> all = {
      {"portable", crc32_impl::update_portable, true},
      {"pclmul", crc32_impl::update_pclmul, crc32_impl::pclmul_supported()},
      {"vpclmul", crc32_impl::update_vpclmul, crc32_impl::vpclmul_supported()},
      {"crc32_update", crc32_update, true},
  };
  std::erase_if(all, [](const Impl& i) { return !i.supported; });
  return all;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// x^n mod P from the bitwise CRC: with no pre/post inversion the CRC of a message M is
// M * x^32 mod P, and a message of one set bit followed by zero bytes is a power of x. In the
// reflected order bit b of byte 0 is x^(7-b) above the following bytes.
uint32_t xn_mod_p_bitwise(unsigned n) {
  const unsigned e = n - 32;  // degree of M
  std::vector<uint8_t> msg(e / 8 + 1, 0);
  msg[0] = static_cast<uint8_t>(1u << (7 - e % 8));
  const uint32_t raw = ~crc32_bitwise_for_test(~0u, msg);  // undoes the inversions
  return static_cast<uint32_t>(crc32_impl::reflect(raw, 32));
}

TEST(Crc32Impl, FoldingConstantsAreXnModP) {
  for (unsigned n : {32u, 63u, 95u, 96u, 160u, 224u, 288u, 352u, 416u, 480u, 544u, 2016u, 2080u}) {
    EXPECT_EQ(crc32_impl::xn_mod_p(n), xn_mod_p_bitwise(n)) << "x^" << n;
  }
  EXPECT_EQ(crc32_impl::xn_mod_p(32), 0x04C11DB7u);
}

TEST(Crc32Impl, BarrettMuIsQuotientOfX64ByP) {
  // mu * P must equal x^64 plus a remainder of degree < 32.
  constexpr uint64_t kP = 0x104C11DB7u;
  const uint64_t mu = crc32_impl::barrett_mu();
  ASSERT_EQ(mu >> 32, 1u);  // degree 32
  uint64_t lo = 0;
  uint64_t hi = 0;
  for (unsigned i = 0; i <= 32; ++i) {
    if ((mu >> i) & 1) {
      lo ^= kP << i;
      if (i > 31) hi ^= kP >> (64 - i);
    }
  }
  EXPECT_EQ(hi, 1u);
  EXPECT_EQ(lo >> 32, 0u);
}

TEST(Crc32Impl, SelectsTheWidestSupported) {
  const auto kind = crc32_impl::selected();
  if (crc32_impl::vpclmul_supported()) {
    EXPECT_EQ(kind, crc32_impl::Kind::kVpclmul);
  } else if (crc32_impl::pclmul_supported()) {
    EXPECT_EQ(kind, crc32_impl::Kind::kPclmul);
  } else {
    EXPECT_EQ(kind, crc32_impl::Kind::kPortable);
  }
  EXPECT_TRUE(!crc32_impl::vpclmul_supported() || crc32_impl::pclmul_supported());
  EXPECT_STRNE(crc32_impl::name(kind), "");
}

// Values from zlib's crc32() (Python: zlib.crc32(bytes(...))), independent of the bitwise reference.
TEST(Crc32Impl, ZlibVectorsWithEveryImplementation) {
  std::vector<uint8_t> ramp(4096);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<uint8_t>(i % 251);
  std::vector<uint8_t> odd(1000);
  for (size_t i = 0; i < odd.size(); ++i) odd[i] = static_cast<uint8_t>(i * 7 + 3);
  const std::vector<uint8_t> zeros(32, 0x00);
  const std::vector<uint8_t> ones(32, 0xFF);
  const auto impls = supported_impls();
  for (const Impl& impl : impls) {
    EXPECT_EQ(impl.fn(0, zeros), 0x190A55ADu) << impl.name;
    EXPECT_EQ(impl.fn(0, ones), 0xFF6CAB0Bu) << impl.name;
    EXPECT_EQ(impl.fn(0, ramp), 0xD465F907u) << impl.name;
    EXPECT_EQ(impl.fn(0, odd), 0x17BC2A46u) << impl.name;
  }
  if (impls.size() < 4)
    GTEST_SKIP() << "this CPU lacks PCLMULQDQ or VPCLMULQDQ: only " << impls.size() << " implementations ran";
}

// Exactly sized heap copies so that AddressSanitizer sees any read past either end.
TEST(Crc32Impl, EveryLengthAndAlignmentMatchesBitwise) {
  const auto impls = supported_impls();
  const std::vector<uint8_t> pattern = random_bytes(1024 + 16, 11);
  std::mt19937 rng(5);
  for (size_t len = 0; len <= 1024; ++len) {
    for (size_t off = 0; off < 16; ++off) {
      const std::vector<uint8_t> buf(pattern.begin(), pattern.begin() + static_cast<long>(off + len));
      const std::span<const uint8_t> s(buf.data() + off, len);
      const uint32_t start = (len + off) % 3 == 0 ? 0 : static_cast<uint32_t>(rng());
      const uint32_t want = crc32_bitwise_for_test(start, s);
      for (const Impl& impl : impls) {
        ASSERT_EQ(impl.fn(start, s), want) << impl.name << " len " << len << " off " << off;
      }
    }
  }
}

TEST(Crc32Impl, LongRandomBuffersMatchPortable) {
  const auto impls = supported_impls();
  std::mt19937 rng(99);
  for (int round = 0; round < 40; ++round) {
    const size_t len = rng() % (80 * 1024);
    const size_t off = rng() % 64;
    const std::vector<uint8_t> buf = random_bytes(off + len, static_cast<uint32_t>(rng()));
    const std::span<const uint8_t> s(buf.data() + off, len);
    const uint32_t start = static_cast<uint32_t>(rng());
    const uint32_t want = crc32_impl::update_portable(start, s);
    if (round < 4) {
      ASSERT_EQ(want, crc32_bitwise_for_test(start, s));
    }
    for (const Impl& impl : impls) ASSERT_EQ(impl.fn(start, s), want) << impl.name << " len " << len;
  }
}

TEST(Crc32Impl, ChainedUpdatesMatchOneUpdate) {
  const auto impls = supported_impls();
  const std::vector<uint8_t> data = random_bytes(20000, 3);
  const uint32_t whole = crc32_bitwise_for_test(0, data);
  std::mt19937 rng(17);
  for (const Impl& impl : impls) {
    for (int round = 0; round < 20; ++round) {
      uint32_t crc = 0;
      size_t pos = 0;
      while (pos < data.size()) {
        // Chunks of every size class: empty, sub-block, a few blocks, many blocks.
        const size_t cap = size_t{1} << (rng() % 14);
        const size_t n = std::min(data.size() - pos, static_cast<size_t>(rng() % (cap + 1)));
        crc = impl.fn(crc, std::span<const uint8_t>(data).subspan(pos, n));
        pos += n;
      }
      ASSERT_EQ(crc, whole) << impl.name << " round " << round;
    }
  }
}

TEST(Crc32Impl, AllOnesAndAllZerosAtBlockBoundaries) {
  // Buffers of one repeated byte hit the folding and Barrett constants with saturated inputs.
  const auto impls = supported_impls();
  for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xFF}}) {
    for (size_t len : {15u, 16u, 17u, 63u, 64u, 65u, 255u, 256u, 257u, 319u, 320u, 4096u, 4112u}) {
      const std::vector<uint8_t> buf(len, fill);
      for (uint32_t start : {0u, 0xFFFFFFFFu}) {
        const uint32_t want = crc32_bitwise_for_test(start, buf);
        for (const Impl& impl : impls) {
          ASSERT_EQ(impl.fn(start, buf), want) << impl.name << " len " << len;
        }
      }
    }
  }
}

}  // namespace
}  // namespace rdmad::roce
