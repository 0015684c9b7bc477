#include "rdmad/cc/pacer.h"

#include <gtest/gtest.h>

namespace rdmad::cc {
namespace {

TEST(Pacer, SpacesDeparturesByWireTimeAtTheFlowRate) {
  const Pacer pacer(100'000);
  PacerState s;
  EXPECT_TRUE(pacer.may_send(s, 0));
  EXPECT_EQ(pacer.on_departure(s, 0, 1000, 1000), 8000);  // 1000 B at 1 Gb/s: 8 µs
  EXPECT_FALSE(pacer.may_send(s, 7999));
  EXPECT_TRUE(pacer.may_send(s, 8000));
  EXPECT_EQ(pacer.on_departure(s, 8000, 1000, 1000), 16'000);
}

TEST(Pacer, FractionalGapsDoNotDrift) {
  const Pacer pacer(100'000);
  PacerState s;
  TimeNs t = 0;
  for (int i = 0; i < 3000; ++i) t = pacer.on_departure(s, t, 100, 3000);  // 266.67 ns each
  EXPECT_EQ(t, 800'000);
}

TEST(Pacer, IdleFlowDoesNotBankCredit) {
  const Pacer pacer(100'000);
  PacerState s;
  pacer.on_departure(s, 0, 1000, 1000);
  EXPECT_EQ(pacer.on_departure(s, 1'000'000, 1000, 1000), 1'008'000);
}

TEST(Pacer, RaisedRateShortensTheGapStillToRun) {
  const Pacer pacer(100'000);
  PacerState s;
  EXPECT_EQ(pacer.on_departure(s, 0, 4096, 1), 32'768'000);  // 4 KiB at 1 Mb/s: 32.8 ms
  // Half the gap has run when the rate goes up 1000-fold: the other half takes 1/1000 of its time.
  pacer.on_rate_raised(s, 16'384'000, 1, 1000);
  EXPECT_EQ(s.next_departure_ns, 16'384'000 + 16'384);
  EXPECT_FALSE(pacer.may_send(s, 16'384'000 + 16'383));
  EXPECT_TRUE(pacer.may_send(s, 16'384'000 + 16'384));
  // The next gap is at the new rate.
  EXPECT_EQ(pacer.on_departure(s, s.next_departure_ns, 4096, 1000), 16'384'000 + 16'384 + 32'768);
}

TEST(Pacer, LoweredRateOrPastDepartureLeavesTheGap) {
  const Pacer pacer(100'000);
  PacerState s;
  pacer.on_departure(s, 0, 1000, 1000);  // next departure at 8 µs
  pacer.on_rate_raised(s, 1000, 1000, 10);  // a cut: from the next departure on
  EXPECT_EQ(s.next_departure_ns, 8000);
  pacer.on_rate_raised(s, 9000, 1000, 100'000);  // already due: nothing to shorten
  EXPECT_EQ(s.next_departure_ns, 8000);
}

TEST(Pacer, LineRateFlowWithNothingQueuedBypassesTheWheel) {
  const Pacer pacer(100'000);
  EXPECT_TRUE(pacer.bypasses_wheel(100'000, false));
  EXPECT_FALSE(pacer.bypasses_wheel(100'000, true));
  EXPECT_FALSE(pacer.bypasses_wheel(99'999, false));
}

}  // namespace
}  // namespace rdmad::cc
