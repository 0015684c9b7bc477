#include "rdmad/roce/crc32.h"

#include <gtest/gtest.h>

#include <random>
#include <string_view>
#include <vector>

namespace rdmad::roce {
namespace {

std::span<const uint8_t> bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(Crc32, CheckValue) {
  // The standard CRC-32 check value (zlib crc32 of "123456789").
  EXPECT_EQ(crc32_update(0, bytes("123456789")), 0xCBF43926u);
  EXPECT_EQ(crc32_update(0, {}), 0u);
}

TEST(Crc32, SlicingMatchesBitwiseForEveryLengthAndAlignment) {
  std::mt19937 rng(7);
  std::vector<uint8_t> data(300);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (size_t off = 0; off < 8; ++off) {
    for (size_t len = 0; len + off <= data.size(); len += 1 + len / 8) {
      const std::span<const uint8_t> s(data.data() + off, len);
      ASSERT_EQ(crc32_update(0, s), crc32_bitwise_for_test(0, s)) << "off " << off << " len " << len;
    }
  }
}

TEST(Crc32, ChainsAcrossSplits) {
  std::vector<uint8_t> data(100);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31 + 7);
  const uint32_t whole = crc32_update(0, data);
  for (size_t split = 0; split <= data.size(); ++split) {
    const std::span<const uint8_t> s(data);
    EXPECT_EQ(crc32_update(crc32_update(0, s.first(split)), s.subspan(split)), whole);
  }
}

TEST(Crc32, CombineGivesTheCrcOfTheConcatenation) {
  std::mt19937 rng(11);
  std::vector<uint8_t> data(9000);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  const std::span<const uint8_t> s(data);
  // Every split of a short buffer, then the packet lengths the soft datapath combines (a full
  // 256-4096 byte payload after a header) and a zero-length tail.
  for (size_t split = 0; split <= 64; ++split) {
    const auto a = s.first(split);
    const auto b = s.subspan(split, 64 - split);
    EXPECT_EQ(Crc32Shift(b.size()).combine(crc32_update(0, a), crc32_update(0, b)), crc32_update(0, s.first(64)))
        << "split " << split;
  }
  for (size_t len : {0u, 1u, 3u, 256u, 1024u, 4096u, 8191u}) {
    const auto a = s.first(40);
    const auto b = s.subspan(40, len);
    const uint32_t whole = crc32_update(0, s.first(40 + len));
    const Crc32Shift shift(len);
    EXPECT_EQ(shift.length(), len);
    EXPECT_EQ(shift.combine(crc32_update(0, a), crc32_update(0, b)), whole) << "len " << len;
  }
  // The shift depends on the length: one byte off gives another CRC.
  EXPECT_NE(Crc32Shift(4095).combine(crc32_update(0, s.first(40)), crc32_update(0, s.subspan(40, 4096))),
            crc32_update(0, s.first(40 + 4096)));
}

}  // namespace
}  // namespace rdmad::roce
