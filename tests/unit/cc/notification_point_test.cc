#include "rdmad/cc/notification_point.h"

#include <gtest/gtest.h>

#include <random>

namespace rdmad::cc {
namespace {

constexpr TimeNs kUs = 1000;

TEST(NotificationPoint, FirstMarkSendsAtOnceLaterMarksWaitForTheInterval) {
  const NotificationPoint np(paper_profile());  // N = 50 µs
  NpState s;
  EXPECT_EQ(np.deferred_cnp_due(s), kNever);
  EXPECT_TRUE(np.on_ce_packet(s, 0));
  EXPECT_EQ(np.deferred_cnp_due(s), kNever);
  EXPECT_FALSE(np.on_ce_packet(s, 10 * kUs));
  EXPECT_FALSE(np.on_ce_packet(s, 20 * kUs));  // coalesced with the previous mark
  EXPECT_EQ(np.deferred_cnp_due(s), 50 * kUs);
  EXPECT_FALSE(np.on_timer(s, 50 * kUs - 1));
  EXPECT_TRUE(np.on_timer(s, 50 * kUs));
  EXPECT_FALSE(np.on_timer(s, 51 * kUs));  // answered once
  EXPECT_EQ(np.deferred_cnp_due(s), kNever);
  EXPECT_FALSE(np.on_ce_packet(s, 60 * kUs));
  EXPECT_TRUE(np.on_ce_packet(s, 100 * kUs));  // the due time passed: sends directly
  EXPECT_EQ(np.deferred_cnp_due(s), kNever);
}

TEST(NotificationPoint, ZeroIntervalAnswersEveryMark) {
  DcqcnParams p = mlx5_profile();
  p.np_cnp_interval_us = 0;
  const NotificationPoint np(p);
  NpState s;
  for (TimeNs t : {0, 0, 1, 2}) EXPECT_TRUE(np.on_ce_packet(s, t));
}

// Random marks and timer calls: CNPs are never closer than N, and every mark is answered by a CNP
// sent at or after it.
TEST(NotificationPoint, NeverMoreThanOneCnpPerInterval) {
  std::mt19937_64 rng(7);
  for (uint32_t interval_us : {1u, 4u, 50u}) {
    DcqcnParams p = mlx5_profile();
    p.np_cnp_interval_us = interval_us;
    const NotificationPoint np(p);
    NpState s;
    TimeNs now = 0;
    TimeNs last_sent = kNever;
    TimeNs oldest_unanswered = kNever;
    int sent = 0;
    for (int i = 0; i < 200'000; ++i) {
      now += static_cast<TimeNs>(rng() % (3 * interval_us * kUs / 2 + 1));
      bool cnp;
      if (rng() % 3 == 0) {
        cnp = np.on_timer(s, now);
      } else {
        if (oldest_unanswered == kNever) oldest_unanswered = now;
        cnp = np.on_ce_packet(s, now);
      }
      if (cnp) {
        if (last_sent != kNever) {
          ASSERT_GE(now - last_sent, np.interval_ns());
        }
        last_sent = now;
        oldest_unanswered = kNever;
        ++sent;
      } else if (oldest_unanswered != kNever) {
        ASSERT_NE(np.deferred_cnp_due(s), kNever);  // a pending mark is never forgotten
      }
    }
    EXPECT_GT(sent, 1000);
  }
}

}  // namespace
}  // namespace rdmad::cc
