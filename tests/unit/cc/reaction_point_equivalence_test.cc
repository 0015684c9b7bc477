// The lazy closed-form ReactionPoint against the step-by-step EagerReactionPoint on random event
// sequences: same rates, target and α within floating-point rounding, same cut times.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "rdmad/cc/reaction_point.h"
#include "rdmad/cc/timing_wheel.h"
#include "unit/cc/eager_reaction_point.h"

namespace rdmad::cc {
namespace {

void expect_close(double lazy, double eager, const char* what, int step) {
  EXPECT_NEAR(lazy, eager, 1e-9 * std::max(1.0, std::abs(eager))) << what << " at step " << step;
}

DcqcnParams random_params(std::mt19937_64& rng) {
  DcqcnParams p = (rng() % 2 == 0) ? paper_profile() : mlx5_profile();
  auto pick = [&rng](uint64_t lo, uint64_t hi) { return lo + rng() % (hi - lo + 1); };
  p.fast_recovery_stages = static_cast<uint32_t>(pick(1, 6));
  p.increase_timer_us = static_cast<uint32_t>(pick(5, 80));
  p.alpha_timer_us = static_cast<uint32_t>(pick(1, 60));
  p.byte_counter_bytes = pick(0, 3) == 0 ? 0 : pick(1000, 200'000);
  p.rate_reduce_period_us = pick(0, 2) == 0 ? 0 : static_cast<uint32_t>(pick(1, 20));
  p.rate_ai_mbps = static_cast<uint32_t>(pick(5, 400));
  p.rate_hai_mbps = static_cast<uint32_t>(pick(50, 2000));
  p.min_dec_fac_pct = static_cast<uint32_t>(pick(0, 100));
  p.rate_cut_gd_log2 = static_cast<uint32_t>(pick(9, 12));
  p.min_rate_mbps = static_cast<uint32_t>(pick(1, 500));
  p.max_rate_mbps = pick(0, 3) == 0 ? static_cast<uint32_t>(pick(10'000, 40'000)) : 0;
  p.rate_on_first_cnp_mbps = pick(0, 3) == 0 ? static_cast<uint32_t>(pick(1000, 20'000)) : 0;
  p.clamp_target_rate = rng() % 2 == 0;
  p.clamp_target_rate_after_time_inc = rng() % 2 == 0;
  return p;
}

TEST(ReactionPointEquivalence, LazyMatchesEagerOnRandomEventSequences) {
  std::mt19937_64 rng(20150817);
  for (int seq = 0; seq < 300; ++seq) {
    const DcqcnParams p = random_params(rng);
    const double line = (rng() % 2 == 0) ? 40'000 : 100'000;
    const ReactionPoint lazy(p, line);
    testing::EagerReactionPoint eager(p, line);
    RpState s;
    TimeNs now = static_cast<TimeNs>(rng() % 1000);
    lazy.start(s, now);
    eager.start(now);
    for (int step = 0; step < 400; ++step) {
      // Mostly short gaps, sometimes long idle periods (many increase events in one catch-up).
      const uint64_t r = rng() % 100;
      now += static_cast<TimeNs>(r < 80 ? rng() % 20'000 : r < 97 ? rng() % 400'000 : rng() % 20'000'000);
      const uint64_t kind = rng() % 10;
      if (kind < 3) {
        lazy.on_cnp(s, now);
        eager.on_cnp(now);
      } else if (kind < 7) {
        const uint64_t bytes = rng() % 300'000;
        lazy.on_bytes_sent(s, now, bytes);
        eager.on_bytes_sent(now, bytes);
      } else {
        lazy.on_timer(s, now);
        eager.advance(now);
      }
      SCOPED_TRACE(::testing::Message() << "sequence " << seq << " " << describe(p));
      expect_close(lazy.rate_mbps(s), eager.rate_mbps(), "rate", step);
      expect_close(lazy.target_mbps(s), eager.target_mbps(), "target", step);
      expect_close(lazy.alpha(s, now), eager.alpha(), "alpha", step);
      ASSERT_EQ(lazy.last_cut_ns(s), eager.last_cut_ns()) << "step " << step;
      ASSERT_EQ(lazy.cut_pending(s), eager.cut_pending()) << "step " << step;
      ASSERT_LE(lazy.rate_mbps(s), lazy.target_mbps(s));
      ASSERT_GE(lazy.rate_mbps(s), lazy.min_rate_mbps());
      ASSERT_LE(lazy.target_mbps(s), lazy.max_rate_mbps());
      if (::testing::Test::HasFailure()) return;
    }
  }
}

}  // namespace
}  // namespace rdmad::cc

namespace rdmad::cc {
namespace {

// The driving pattern of the simulator and the soft backend: only flows below line rate sit on a
// timing wheel at next_event_ns(). Every expiry must find an event actually due (no spurious
// wake-ups), and rates read at any time must match the eager reference advanced to the same time.
TEST(ReactionPointEquivalence, WheelDrivenFlowsMatchEager) {
  for (const DcqcnParams& p : {paper_profile(), mlx5_profile()}) {
    constexpr uint32_t kFlows = 200;
    constexpr TimeNs kSlotNs = 1000;
    const ReactionPoint rp(p, 100'000);
    std::vector<RpState> lazy(kFlows);
    std::vector<testing::EagerReactionPoint> eager(kFlows, testing::EagerReactionPoint(p, 100'000));
    TimingWheel wheel(kSlotNs, kFlows);
    for (uint32_t i = 0; i < kFlows; ++i) {
      rp.start(lazy[i], 0);
      eager[i].start(0);
    }
    const auto reschedule = [&](uint32_t i) {
      const TimeNs next = rp.next_event_ns(lazy[i]);
      if (next == kNever) {
        wheel.cancel(i);
      } else {
        wheel.insert(i, next);
      }
    };
    std::mt19937_64 rng(99);
    TimeNs now = 0;
    uint64_t expiries = 0;
    for (int step = 0; step < 20'000; ++step) {
      const TimeNs previous = now;
      now += static_cast<TimeNs>(rng() % 3000);
      wheel.advance(now, [&](TimerId i, TimeNs due_ns) {
        const TimeNs due = rp.next_event_ns(lazy[i]);
        EXPECT_EQ(due, due_ns);
        EXPECT_LE(due, now);  // never early
        // Not already handed back by the previous advance (which covered whole slots only).
        EXPECT_GT(due, previous / kSlotNs * kSlotNs);
        rp.on_timer(lazy[i], now);
        EXPECT_GT(rp.next_event_ns(lazy[i]), now);
        ++expiries;
        reschedule(i);
      });
      const auto i = static_cast<uint32_t>(rng() % kFlows);
      if (rng() % 4 == 0) {
        rp.on_cnp(lazy[i], now);
        eager[i].on_cnp(now);
      } else {
        const uint64_t bytes = 4096 * (1 + rng() % 8);
        rp.on_bytes_sent(lazy[i], now, bytes);
        eager[i].on_bytes_sent(now, bytes);
      }
      reschedule(i);
      // Any flow, read now: the wheel has applied everything due (up to slot granularity).
      const auto j = static_cast<uint32_t>(rng() % kFlows);
      rp.on_timer(lazy[j], now);
      eager[j].advance(now);
      ASSERT_NEAR(rp.rate_mbps(lazy[j]), eager[j].rate_mbps(), 1e-9 * eager[j].rate_mbps())
          << "step " << step;
      ASSERT_NEAR(rp.target_mbps(lazy[j]), eager[j].target_mbps(), 1e-9 * eager[j].target_mbps());
      reschedule(j);
    }
    EXPECT_GT(expiries, 1000u);
  }
}

}  // namespace
}  // namespace rdmad::cc
