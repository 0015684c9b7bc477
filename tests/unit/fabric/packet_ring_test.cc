#include "packet_ring.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <vector>

namespace rdmad::fabric {
namespace {

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 13);
  return v;
}

TEST(PacketRing, FifoWithBytesAndTos) {
  PacketRing r(1000, 16);
  EXPECT_TRUE(r.empty());
  ASSERT_TRUE(r.push(pattern(100, 1), 2, 10));
  ASSERT_TRUE(r.push(pattern(0, 0), 3, 11));
  ASSERT_TRUE(r.push(pattern(200, 2), 4, 12));
  EXPECT_EQ(r.packets(), 3u);
  EXPECT_EQ(r.bytes(), 300u);
  const auto data = [&] {
    auto s = r.data(r.front());
    return std::vector<uint8_t>(s.begin(), s.end());
  };
  EXPECT_EQ(data(), pattern(100, 1));
  EXPECT_EQ(r.front().tos, 2);
  EXPECT_EQ(r.front().arrival_ns, 10);
  r.pop();
  EXPECT_EQ(r.front().len, 0u);
  r.pop();
  EXPECT_EQ(data(), pattern(200, 2));
  r.pop();
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.bytes(), 0u);
}

TEST(PacketRing, RefusesWhenFullOfBytesOrDescriptors) {
  PacketRing bytes(250, 100);
  EXPECT_TRUE(bytes.push(pattern(100, 0), 0, 0));
  EXPECT_TRUE(bytes.push(pattern(100, 0), 0, 0));
  EXPECT_FALSE(bytes.push(pattern(100, 0), 0, 0));
  PacketRing descs(10'000, 2);
  EXPECT_TRUE(descs.push(pattern(1, 0), 0, 0));
  EXPECT_TRUE(descs.push(pattern(1, 0), 0, 0));
  EXPECT_FALSE(descs.push(pattern(1, 0), 0, 0));
  descs.pop();
  EXPECT_TRUE(descs.push(pattern(1, 0), 0, 0));
}

// Random pushes and pops against a std::deque model: contents survive every wrap-around.
TEST(PacketRing, MatchesAModelAcrossWraps) {
  PacketRing r(5000, 64);
  std::deque<std::vector<uint8_t>> model;
  std::mt19937 rng(11);
  size_t pushed = 0;
  for (int step = 0; step < 20000; ++step) {
    if (rng() % 2 == 0) {
      auto v = pattern(rng() % 1500, static_cast<uint8_t>(step));
      if (r.push(v, static_cast<uint8_t>(step), step)) {
        model.push_back(std::move(v));
        ++pushed;
      } else {
        // A refusal only happens when the ring is genuinely crowded.
        ASSERT_GT(r.bytes() + v.size() + 1500, 5000u / 2);
      }
    } else if (!model.empty()) {
      auto s = r.data(r.front());
      ASSERT_EQ(std::vector<uint8_t>(s.begin(), s.end()), model.front()) << "step " << step;
      r.pop();
      model.pop_front();
    }
    ASSERT_EQ(r.packets(), model.size());
  }
  EXPECT_GT(pushed, 5000u);
}

}  // namespace
}  // namespace rdmad::fabric
