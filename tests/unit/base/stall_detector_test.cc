// The watchdog's stall detector on a manual clock: busy without progress past the threshold is a
// stall; idle never is; progress never is.
#include "rdmad/base/stall_detector.h"

#include <gtest/gtest.h>

namespace rdmad::base {
namespace {

using namespace std::chrono_literals;

class StallDetectorTest : public ::testing::Test {
 protected:
  StallDetector::TimePoint now_{};  // the manual clock
  Heartbeat beat_;
  StallDetector detector_{1s};
};

TEST_F(StallDetectorTest, BusyWithoutProgressPastTheThresholdIsStalled) {
  beat_.busy(1);
  detector_.add("datapath:nic0", &beat_, now_);
  now_ += 1s;
  EXPECT_FALSE(detector_.check(now_)[0].stalled);  // exactly the threshold: not yet
  EXPECT_EQ(detector_.states()[0].busy_without_progress, 1s);
  now_ += 1ms;
  const auto& s = detector_.check(now_);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].name, "datapath:nic0");
  EXPECT_TRUE(s[0].stalled);
  EXPECT_EQ(s[0].busy_without_progress, 1001ms);
  EXPECT_TRUE(detector_.any_stalled());
  // Progress clears it at the next check.
  beat_.idle(1);
  now_ += 10s;
  EXPECT_FALSE(detector_.check(now_)[0].stalled);
  EXPECT_EQ(detector_.states()[0].busy_without_progress, 0s);
  EXPECT_FALSE(detector_.any_stalled());
}

TEST_F(StallDetectorTest, IdleIsNeverStalled) {
  beat_.idle(7);
  detector_.add("flow-engine", &beat_, now_);
  for (int i = 0; i < 100; ++i) {
    now_ += 1h;
    EXPECT_FALSE(detector_.check(now_)[0].stalled);
    EXPECT_EQ(detector_.states()[0].busy_without_progress, 0s);
  }
  // A pass that begins after a long idle time is measured from the last check that saw it idle.
  beat_.busy(8);
  now_ += 500ms;
  EXPECT_FALSE(detector_.check(now_)[0].stalled);  // first sight of the new word: progress
  now_ += 900ms;
  EXPECT_FALSE(detector_.check(now_)[0].stalled);
  EXPECT_EQ(detector_.states()[0].busy_without_progress, 900ms);
  now_ += 200ms;
  EXPECT_TRUE(detector_.check(now_)[0].stalled);
}

TEST_F(StallDetectorTest, AdvancingIsNeverStalled) {
  detector_.add("datapath:nic0", &beat_, now_);
  for (uint64_t pass = 1; pass < 1000; ++pass) {
    beat_.busy(pass);  // always busy (a busy-polling thread), but every check sees a new pass
    now_ += 10s;
    EXPECT_FALSE(detector_.check(now_)[0].stalled) << pass;
  }
  EXPECT_FALSE(detector_.any_stalled());
}

TEST_F(StallDetectorTest, OnlyTheStuckThreadIsNamedAndRemoveForgetsIt) {
  Heartbeat other;
  beat_.busy(1);
  other.busy(1);
  detector_.add("datapath:nic0", &beat_, now_);
  detector_.add("flow-engine", &other, now_);
  now_ += 2s;
  other.busy(2);
  const auto& s = detector_.check(now_);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_TRUE(s[0].stalled);
  EXPECT_FALSE(s[1].stalled);
  detector_.remove("datapath:nic0");
  ASSERT_EQ(detector_.check(now_).size(), 1u);
  EXPECT_EQ(detector_.states()[0].name, "flow-engine");
  EXPECT_FALSE(detector_.any_stalled());
}

}  // namespace
}  // namespace rdmad::base
