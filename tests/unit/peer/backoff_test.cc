// Reconnect back-off: doubling, cap, jitter bounds, reset, determinism for a seed.
#include <gtest/gtest.h>

#include "rdmad/daemon/peer/backoff.h"

namespace rdmad::peer {
namespace {

using std::chrono::milliseconds;

TEST(PeerBackoff, DoublesUpToTheMaximumWithinTheJitterBand) {
  Backoff b(milliseconds(100), milliseconds(1000), 0.5, 42);
  const int64_t bases[] = {100, 200, 400, 800, 1000, 1000, 1000};
  for (int64_t base : bases) {
    const auto d = b.next().count();
    EXPECT_GE(d, base / 2) << "base " << base;
    EXPECT_LE(d, base) << "base " << base;
  }
  b.reset();
  EXPECT_LE(b.next().count(), 100);
}

TEST(PeerBackoff, WithoutJitterTheDelaysAreExact) {
  Backoff b(milliseconds(10), milliseconds(50), 0.0, 1);
  std::vector<int64_t> got;
  for (int i = 0; i < 5; ++i) got.push_back(b.next().count());
  EXPECT_EQ(got, (std::vector<int64_t>{10, 20, 40, 50, 50}));
}

TEST(PeerBackoff, JitterSpreadsDaemonsApartButIsReproducible) {
  Backoff a(milliseconds(1000), milliseconds(1000), 0.5, 7);
  Backoff same(milliseconds(1000), milliseconds(1000), 0.5, 7);
  Backoff other(milliseconds(1000), milliseconds(1000), 0.5, 8);
  int differ = 0;
  for (int i = 0; i < 20; ++i) {
    const auto x = a.next();
    EXPECT_EQ(x, same.next());
    differ += x != other.next();
  }
  EXPECT_GT(differ, 15);
}

}  // namespace
}  // namespace rdmad::peer
