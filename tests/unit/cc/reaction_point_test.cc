// Golden traces of docs/dcqcn.md, asserted exactly with a manual clock.
#include "rdmad/cc/reaction_point.h"

#include <gtest/gtest.h>

#include <cmath>

namespace rdmad::cc {
namespace {

constexpr TimeNs kUs = 1000;

// A new flow at t = 0 that has just received its first CNP.
RpState cut_at_zero(const ReactionPoint& rp) {
  RpState s;
  rp.start(s, 0);
  rp.on_cnp(s, 0);
  return s;
}

TEST(ReactionPoint, StateFitsACacheLine) { EXPECT_LE(sizeof(RpState), 64u); }

TEST(ReactionPoint, NewFlowRunsAtLineRateWithoutEvents) {
  const ReactionPoint rp(mlx5_profile(), 100'000);
  RpState s;
  rp.start(s, 5 * kUs);
  EXPECT_EQ(rp.rate_mbps(s), 100'000);
  EXPECT_EQ(rp.target_mbps(s), 100'000);
  EXPECT_TRUE(rp.at_line_rate(s));
  EXPECT_EQ(rp.next_event_ns(s), kNever);
  rp.on_bytes_sent(s, 6 * kUs, 1'000'000);
  rp.on_timer(s, 1'000 * kUs);
  EXPECT_EQ(rp.rate_mbps(s), 100'000);
  EXPECT_EQ(rp.next_event_ns(s), kNever);
}

// Paper profile, 40 Gb/s, α = 1, one CNP at t = 0: Rc = 20 Gb/s, Rt = 40 Gb/s, then fast recovery
// on the 55 µs timer (SIGCOMM'15 §3.3; docs/dcqcn.md "golden trace").
TEST(ReactionPoint, PaperFastRecoveryGoldenTrace) {
  const ReactionPoint rp(paper_profile(), 40'000);
  RpState s = cut_at_zero(rp);
  EXPECT_EQ(rp.rate_mbps(s), 20'000);
  EXPECT_EQ(rp.target_mbps(s), 40'000);
  EXPECT_EQ(rp.alpha(s, 0), 1.0);  // (1 − 1/256)·1 + 1/256
  const double expected[] = {30'000, 35'000, 37'500, 38'750, 39'375};
  double previous = 20'000;
  for (int k = 1; k <= 5; ++k) {
    EXPECT_EQ(rp.next_event_ns(s), k * 55 * kUs);
    rp.on_timer(s, k * 55 * kUs - 1);  // one ns early: nothing happens
    EXPECT_EQ(rp.rate_mbps(s), previous);
    rp.on_timer(s, k * 55 * kUs);
    previous = expected[k - 1];
    EXPECT_EQ(rp.rate_mbps(s), expected[k - 1]) << "event " << k;
    EXPECT_EQ(rp.target_mbps(s), 40'000);
  }
  // Sixth event: additive increase; Rt + R_AI is clamped to line rate, Rc halves the gap again.
  rp.on_timer(s, 6 * 55 * kUs);
  EXPECT_EQ(rp.rate_mbps(s), 39'687.5);
  // The gap (312.5 Mb/s) halves each event; within 1 Mb/s the flow is at line rate: 9 more events.
  rp.on_timer(s, 14 * 55 * kUs);
  EXPECT_FALSE(rp.at_line_rate(s));
  EXPECT_EQ(rp.next_event_ns(s), 15 * 55 * kUs);
  rp.on_timer(s, 15 * 55 * kUs);
  EXPECT_TRUE(rp.at_line_rate(s));
  EXPECT_EQ(rp.rate_mbps(s), 40'000);
  EXPECT_EQ(rp.next_event_ns(s), kNever);
}

TEST(ReactionPoint, LateTimerCatchesUpInOneCall) {
  const ReactionPoint rp(paper_profile(), 40'000);
  RpState s = cut_at_zero(rp);
  rp.on_timer(s, 5 * 55 * kUs + 54 * kUs);  // five events due, not the sixth
  EXPECT_EQ(rp.rate_mbps(s), 39'375);
  EXPECT_EQ(rp.next_event_ns(s), 6 * 55 * kUs);
}

TEST(ReactionPoint, PaperAlphaDecaysOncePerPeriod) {
  const ReactionPoint rp(paper_profile(), 40'000);
  RpState s = cut_at_zero(rp);
  for (int n : {0, 1, 2, 10, 18, 176, 177}) {
    EXPECT_EQ(rp.alpha(s, n * 55 * kUs), std::pow(255.0 / 256.0, n)) << n;
    EXPECT_EQ(rp.alpha(s, (n + 1) * 55 * kUs - 1), std::pow(255.0 / 256.0, n)) << n;
  }
  EXPECT_NEAR(rp.alpha(s, 1'000 * kUs), 0.93, 0.005);  // ≈ 0.93 at 1 ms
  EXPECT_GT(rp.alpha(s, 9'700 * kUs), 0.5);            // 0.5 at ≈ 9.7 ms
  EXPECT_LT(rp.alpha(s, 9'790 * kUs), 0.5);
}

TEST(ReactionPoint, CutUsesAlphaBeforeTheCnpUpdate) {
  const ReactionPoint rp(paper_profile(), 40'000);
  RpState s = cut_at_zero(rp);
  const TimeNs t = 10 * 55 * kUs;
  const double a = std::pow(255.0 / 256.0, 10);
  const double before = rp.rate_mbps(s);
  rp.on_timer(s, t);
  const double rc = rp.rate_mbps(s);
  ASSERT_NE(before, rc);
  rp.on_cnp(s, t);
  EXPECT_EQ(rp.rate_mbps(s), rc * (1 - a / 2));
  EXPECT_EQ(rp.target_mbps(s), rc);  // paper: Rt ← Rc
  EXPECT_EQ(rp.alpha(s, t), a * (255.0 / 256) + 1.0 / 256);
}

// mlx5: α half-life without CNPs ≈ 142 µs (g = 5/1024, K = 1 µs).
TEST(ReactionPoint, Mlx5AlphaHalfLife) {
  const ReactionPoint rp(mlx5_profile(), 100'000);
  RpState s;
  rp.start(s, 0);
  const double a0 = 1023.0 / 1024;
  EXPECT_EQ(rp.alpha(s, 0), a0);
  EXPECT_EQ(rp.alpha(s, 142 * kUs), a0 * std::pow(1019.0 / 1024, 142));
  EXPECT_GT(rp.alpha(s, 141 * kUs), a0 / 2);
  EXPECT_LT(rp.alpha(s, 142 * kUs), a0 / 2);
}

// mlx5: a CNP every µs still cuts at most once per 4 µs rate-reduce monitor period; CNPs inside the
// period coalesce into one cut at its end.
TEST(ReactionPoint, Mlx5CutsAtMostOncePerCheckPeriod) {
  const ReactionPoint rp(mlx5_profile(), 100'000);
  RpState s;
  rp.start(s, 0);
  int cuts = 0;
  TimeNs last = kNever;
  double rate = rp.rate_mbps(s);
  for (TimeNs t = 0; t <= 100 * kUs; t += kUs) {
    rp.on_cnp(s, t);
    if (rp.last_cut_ns(s) != last) {
      if (last != kNever) {
        EXPECT_EQ(rp.last_cut_ns(s) - last, 4 * kUs) << "cut at " << rp.last_cut_ns(s);
      }
      EXPECT_LE(rp.rate_mbps(s), rate);  // α stays ≈ 1: the 1 Mb/s floor is reached after ~17 cuts
      EXPECT_GE(rp.rate_mbps(s), rp.min_rate_mbps());
      last = rp.last_cut_ns(s);
      ++cuts;
    } else {
      EXPECT_EQ(rp.rate_mbps(s), rate) << "rate changed without a cut at " << t;
    }
    rate = rp.rate_mbps(s);
  }
  EXPECT_EQ(cuts, 26);  // 0, 4, …, 100 µs
  // First cut: α = 1023/1024 → Rc·(1 − α/2), above the 50% min_dec_fac floor.
  RpState f;
  rp.start(f, 0);
  rp.on_cnp(f, 0);
  EXPECT_EQ(rp.rate_mbps(f), 100'000 * (1 - (1023.0 / 1024) / 2));
  // A CNP inside the period is deferred to its end, visible as the next event.
  rp.on_cnp(f, 1 * kUs);
  EXPECT_TRUE(rp.cut_pending(f));
  EXPECT_EQ(rp.next_event_ns(f), 4 * kUs);
  const double before = rp.rate_mbps(f);
  rp.on_timer(f, 4 * kUs);
  EXPECT_FALSE(rp.cut_pending(f));
  EXPECT_EQ(rp.last_cut_ns(f), 4 * kUs);
  EXPECT_LT(rp.rate_mbps(f), before);
}

TEST(ReactionPoint, CutLimitsAndClamps) {
  DcqcnParams p = paper_profile();
  p.rate_cut_gd_log2 = 10;  // cut by α·Rc: with α = 1 a full cut ...
  p.min_dec_fac_pct = 50;   // ... but the new rate stays ≥ 50% of the old
  p.min_rate_mbps = 1000;
  p.max_rate_mbps = 25'000;
  const ReactionPoint rp(p, 40'000);
  EXPECT_EQ(rp.max_rate_mbps(), 25'000);
  RpState s;
  rp.start(s, 0);
  EXPECT_EQ(rp.rate_mbps(s), 25'000);
  rp.on_cnp(s, 0);
  EXPECT_EQ(rp.rate_mbps(s), 12'500);
  for (int i = 1; i < 10; ++i) rp.on_cnp(s, i);
  EXPECT_EQ(rp.rate_mbps(s), 1000);  // floor, not 25000/2^10
  EXPECT_GE(rp.target_mbps(s), rp.rate_mbps(s));
}

// rpg_min_dec_fac as NVIDIA documents it: "new_cur_rate >= min_dec_fac% * old_cur_rate", 100 means no
// rate decrease. The expected rates are computed by hand from new = max(old·(1 − α/2), old·f/100).
// (The old reading, "a cut lowers the rate by at most f%", gives 75000, 50000, 50000 and 59921.875.)
TEST(ReactionPoint, MinDecFacKeepsTheNewRateAtLeastThatPercentOfTheOld) {
  const auto first_cut = [](uint32_t min_dec_fac, double alpha0) {
    DcqcnParams p = paper_profile();
    p.min_dec_fac_pct = min_dec_fac;
    p.initial_alpha = alpha0;
    const ReactionPoint rp(p, 100'000);
    return rp.rate_mbps(cut_at_zero(rp));
  };
  // α = 1: the α/2 cut is 50%.
  EXPECT_EQ(first_cut(25, 1.0), 50'000);   // 1 − α/2 = 0.5 > 0.25: the floor does not bind
  EXPECT_EQ(first_cut(50, 1.0), 50'000);   // both 0.5
  EXPECT_EQ(first_cut(75, 1.0), 75'000);   // floor 0.75 binds
  EXPECT_EQ(first_cut(100, 1.0), 100'000);  // 100: no rate decrease at all
  EXPECT_EQ(first_cut(0, 1.0), 50'000);    // 0: no floor
  // α = 0.5: the α/2 cut is 25% → 75000.
  EXPECT_EQ(first_cut(25, 0.5), 75'000);
  EXPECT_EQ(first_cut(80, 0.5), 80'000);

  // Two cuts at t = 0 with f = 80, α0 = 0.5, g = 1/256 (paper): cut 1 → max(75000, 80000) = 80000;
  // α ← 0.5·255/256 + 1/256 = 0.501953125; cut 2 → max(80000·(1 − 0.2509765625) = 59921.875,
  // 80000·0.8 = 64000) = 64000.
  DcqcnParams p = paper_profile();
  p.min_dec_fac_pct = 80;
  p.initial_alpha = 0.5;
  const ReactionPoint rp(p, 100'000);
  RpState s = cut_at_zero(rp);
  EXPECT_EQ(rp.rate_mbps(s), 80'000);
  EXPECT_EQ(rp.alpha(s, 0), 0.501953125);
  rp.on_cnp(s, 0);
  EXPECT_EQ(rp.rate_mbps(s), 64'000);

  // gd = 10 cuts by α: with α = 1 the α cut alone would reach 0, so the floor decides: 25% → 25000.
  DcqcnParams q = paper_profile();
  q.rate_cut_gd_log2 = 10;
  q.min_dec_fac_pct = 25;
  const ReactionPoint rq(q, 100'000);
  EXPECT_EQ(rq.rate_mbps(cut_at_zero(rq)), 25'000);
}

// rate_to_set_on_first_cnp, NVIDIA: "Rates (current, target) on first CNP" ([N1], [N2] in
// docs/dcqcn.md): the first CNP sets Rc and Rt to the knob; the traces below are worked by hand from
// the mlx5 profile (F = 1, R_AI = 5 Mb/s, R_HAI = 50 Mb/s, timer 300 µs).
DcqcnParams first_cnp_params(uint32_t mbps, uint64_t byte_counter_bytes) {
  DcqcnParams p = mlx5_profile();
  p.rate_on_first_cnp_mbps = mbps;
  p.byte_counter_bytes = byte_counter_bytes;
  return p;
}

TEST(ReactionPoint, RateOnFirstCnpSetsCurrentAndTargetThenTimerRecovery) {
  const ReactionPoint rp(first_cnp_params(10'000, 0), 100'000);  // timer only
  RpState s = cut_at_zero(rp);
  EXPECT_EQ(rp.rate_mbps(s), 10'000);
  EXPECT_EQ(rp.target_mbps(s), 10'000);  // was 100 000 (Rt left at line rate) before the fix
  EXPECT_FALSE(rp.at_line_rate(s));
  EXPECT_EQ(rp.next_event_ns(s), 300 * kUs);
  // T = 1 ≤ F: fast recovery averages toward Rt = 10 000, which is where Rc already is.
  rp.on_timer(s, 300 * kUs);
  EXPECT_EQ(rp.rate_mbps(s), 10'000);
  EXPECT_EQ(rp.target_mbps(s), 10'000);
  // T = 2, 3, 4 > F (BC = 0 ≤ F): additive, Rt += 5, Rc ← (Rt + Rc)/2.
  const double rt[] = {10'005, 10'010, 10'015};
  const double rc[] = {10'002.5, 10'006.25, 10'010.625};
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(rp.next_event_ns(s), (k + 2) * 300 * kUs);
    rp.on_timer(s, (k + 2) * 300 * kUs);
    EXPECT_EQ(rp.target_mbps(s), rt[k]) << "timer event " << k + 2;
    EXPECT_EQ(rp.rate_mbps(s), rc[k]) << "timer event " << k + 2;
  }
}

TEST(ReactionPoint, RateOnFirstCnpThenByteCounterAndHyperIncrease) {
  const ReactionPoint rp(first_cnp_params(10'000, 1000), 100'000);
  RpState s = cut_at_zero(rp);
  ASSERT_EQ(rp.rate_mbps(s), 10'000);
  ASSERT_EQ(rp.target_mbps(s), 10'000);
  rp.on_bytes_sent(s, 1 * kUs, 1000);  // BC = 1, T = 0: fast recovery
  EXPECT_EQ(rp.target_mbps(s), 10'000);
  EXPECT_EQ(rp.rate_mbps(s), 10'000);
  rp.on_bytes_sent(s, 2 * kUs, 1000);  // BC = 2 > F, T = 0: additive
  EXPECT_EQ(rp.target_mbps(s), 10'005);
  EXPECT_EQ(rp.rate_mbps(s), 10'002.5);
  rp.on_timer(s, 300 * kUs);  // T = 1, BC = 2: additive
  EXPECT_EQ(rp.target_mbps(s), 10'010);
  EXPECT_EQ(rp.rate_mbps(s), 10'006.25);
  rp.on_timer(s, 600 * kUs);  // T = 2, BC = 2: hyper, i = 1: Rt += 50
  EXPECT_EQ(rp.target_mbps(s), 10'060);
  EXPECT_EQ(rp.rate_mbps(s), 10'033.125);
  rp.on_bytes_sent(s, 601 * kUs, 1000);  // BC = 3, T = 2: hyper, i = 1
  EXPECT_EQ(rp.target_mbps(s), 10'110);
  EXPECT_EQ(rp.rate_mbps(s), 10'071.5625);
  rp.on_timer(s, 900 * kUs);  // T = 3, BC = 3: hyper, i = 2: Rt += 100
  EXPECT_EQ(rp.target_mbps(s), 10'210);
  EXPECT_EQ(rp.rate_mbps(s), 10'140.78125);
}

TEST(ReactionPoint, RateOnFirstCnpOnlyOnTheFirstCnp) {
  const ReactionPoint rp(first_cnp_params(10'000, 32767), 100'000);
  RpState s = cut_at_zero(rp);
  // Second CNP 10 µs later (past the 4 µs check period, no increase between): the normal α cut,
  // α/2 < 50% so above the min_dec_fac floor; Rt keeps 10 000, where the first CNP set it.
  const double a = rp.alpha(s, 10 * kUs);
  rp.on_cnp(s, 10 * kUs);
  EXPECT_DOUBLE_EQ(rp.rate_mbps(s), 10'000 * (1 - a / 2));
  EXPECT_EQ(rp.target_mbps(s), 10'000);
  // A flow restarted (a new QP) gets the knob again.
  rp.start(s, 20 * kUs);
  rp.on_cnp(s, 20 * kUs);
  EXPECT_EQ(rp.rate_mbps(s), 10'000);
  EXPECT_EQ(rp.target_mbps(s), 10'000);
}

TEST(ReactionPoint, RateOnFirstCnpStaysWithinMinAndMaxRate) {
  // Above the flow's maximum rate (the vendor documents 1..line rate): the flow stays at its
  // maximum; the knob never raises a rate. The first CNP still counts as the flow's first cut.
  {
    const ReactionPoint rp(first_cnp_params(200'000, 32767), 100'000);
    RpState s = cut_at_zero(rp);
    EXPECT_EQ(rp.rate_mbps(s), 100'000);
    EXPECT_EQ(rp.target_mbps(s), 100'000);
    EXPECT_EQ(rp.next_event_ns(s), kNever);
    rp.on_cnp(s, 10 * kUs);
    EXPECT_LT(rp.rate_mbps(s), 100'000);
  }
  {  // rpg_max_rate below the knob
    DcqcnParams p = first_cnp_params(50'000, 32767);
    p.max_rate_mbps = 40'000;
    const ReactionPoint rp(p, 100'000);
    RpState s = cut_at_zero(rp);
    EXPECT_EQ(rp.rate_mbps(s), 40'000);
    EXPECT_EQ(rp.target_mbps(s), 40'000);
  }
  {  // rpg_min_rate above the knob
    DcqcnParams p = first_cnp_params(50, 32767);
    p.min_rate_mbps = 100;
    const ReactionPoint rp(p, 100'000);
    RpState s = cut_at_zero(rp);
    EXPECT_EQ(rp.rate_mbps(s), 100);
    EXPECT_EQ(rp.target_mbps(s), 100);
  }
}

// Regression: rate_to_set_on_first_cnp = 0 is the normal cut (mlx5 profile, α = 1023/1024, cut by
// α/2, floor 50%): Rc = 100 000·(1 − 1023/2048) = 50 048.828125, Rt stays at line rate.
TEST(ReactionPoint, RateOnFirstCnpZeroIsTheNormalCut) {
  const ReactionPoint rp(first_cnp_params(0, 32767), 100'000);
  RpState s = cut_at_zero(rp);
  EXPECT_EQ(rp.rate_mbps(s), 50'048.828125);
  EXPECT_EQ(rp.target_mbps(s), 100'000);
  rp.on_timer(s, 300 * kUs);  // T = 1: fast recovery toward line rate
  EXPECT_EQ(rp.rate_mbps(s), 75'024.4140625);
}

TEST(ReactionPoint, TargetClampFlags) {
  DcqcnParams p = mlx5_profile();  // clamp_tgt_rate 0, clamp_tgt_rate_after_time_inc 1
  p.byte_counter_bytes = 0;
  const ReactionPoint rp(p, 100'000);
  RpState s = cut_at_zero(rp);
  const double rc1 = rp.rate_mbps(s);
  rp.on_cnp(s, 10 * kUs);  // no timer increase since the last cut: Rt keeps 100 G
  EXPECT_EQ(rp.target_mbps(s), 100'000);
  EXPECT_LT(rp.rate_mbps(s), rc1);
  rp.on_timer(s, 310 * kUs);  // one timer increase
  const double rc2 = rp.rate_mbps(s);
  rp.on_cnp(s, 311 * kUs);
  EXPECT_EQ(rp.target_mbps(s), rc2);  // clamped after a timer increase

  p.clamp_target_rate_after_time_inc = false;
  const ReactionPoint never(p, 100'000);
  rp.start(s, 0);
  never.on_cnp(s, 0);
  never.on_timer(s, 310 * kUs);
  never.on_cnp(s, 311 * kUs);
  EXPECT_EQ(never.target_mbps(s), 100'000);
}

// A byte-counter increase since the previous cut always leads to Rt ← Rc at the next cut, with or
// without clamp_tgt_rate_after_time_inc ("updated if the rate was increased due to the timer, and
// not only due to the byte counter").
TEST(ReactionPoint, ByteCounterIncreaseClampsTargetAtNextCut) {
  for (bool after_timer : {true, false}) {
    DcqcnParams p = mlx5_profile();
    p.clamp_target_rate_after_time_inc = after_timer;
    const ReactionPoint rp(p, 100'000);
    RpState s = cut_at_zero(rp);
    rp.on_cnp(s, 10 * kUs);  // back to back, no increase between: Rt keeps line rate
    ASSERT_EQ(rp.target_mbps(s), 100'000);
    rp.on_bytes_sent(s, 12 * kUs, p.byte_counter_bytes);  // one byte-counter event (fast recovery)
    const double raised = rp.rate_mbps(s);
    ASSERT_LT(raised, 100'000);
    rp.on_cnp(s, 20 * kUs);
    EXPECT_EQ(rp.target_mbps(s), raised) << "after_timer " << after_timer;
    EXPECT_LT(rp.rate_mbps(s), raised);
  }
}

TEST(ReactionPoint, ByteCounterZeroDisables) {
  DcqcnParams p = paper_profile();
  p.byte_counter_bytes = 0;
  const ReactionPoint rp(p, 40'000);
  RpState s = cut_at_zero(rp);
  rp.on_bytes_sent(s, 1 * kUs, uint64_t{1} << 40);
  EXPECT_EQ(rp.rate_mbps(s), 20'000);
}

// Both counters past F: hyper increase with i = min(T, BC) − F (checked event by event).
TEST(ReactionPoint, ByteCounterAdditiveAndHyperIncrease) {
  DcqcnParams p = paper_profile();
  p.fast_recovery_stages = 1;
  p.rate_ai_mbps = 10;
  p.rate_hai_mbps = 100;
  p.increase_timer_us = 10;
  p.byte_counter_bytes = 1000;
  const ReactionPoint rp(p, 100'000);
  RpState s = cut_at_zero(rp);
  rp.on_cnp(s, 500);  // α stays 1: Rc 25 G, Rt 50 G
  ASSERT_EQ(rp.rate_mbps(s), 25'000);
  ASSERT_EQ(rp.target_mbps(s), 50'000);
  struct Step {
    TimeNs t;
    uint64_t bytes;  // 0: timer
    double rt, rc;
  };
  const Step steps[] = {
      {1 * kUs, 1000, 50'000, 37'500},       // BC=1: fast recovery
      {2 * kUs, 1000, 50'010, 43'755},       // BC=2: additive
      {10'500, 0, 50'020, 46'887.5},         // T=1: additive
      {20'500, 0, 50'120, 48'503.75},        // T=2, BC=2: hyper, i=1
      {21 * kUs, 1000, 50'220, 49'361.875},  // BC=3: hyper, i=min(2,3)−1=1
      {30'500, 0, 50'420, 49'890.9375},      // T=3: hyper, i=2
  };
  for (const Step& st : steps) {
    if (st.bytes > 0) {
      rp.on_bytes_sent(s, st.t, st.bytes);
    } else {
      rp.on_timer(s, st.t);
    }
    EXPECT_EQ(rp.target_mbps(s), st.rt) << st.t;
    EXPECT_EQ(rp.rate_mbps(s), st.rc) << st.t;
  }
}

}  // namespace
}  // namespace rdmad::cc
