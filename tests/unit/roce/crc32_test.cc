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

}  // namespace
}  // namespace rdmad::roce
