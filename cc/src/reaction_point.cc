#include "rdmad/cc/reaction_point.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace rdmad::cc {

namespace {
// Event counters saturate here instead of wrapping (only the comparisons with F matter).
constexpr uint32_t kCounterMax = std::numeric_limits<uint32_t>::max() / 2;
}  // namespace

ReactionPoint::ReactionPoint(const DcqcnParams& p, double line_rate_mbps)
    : line_rate_mbps_(line_rate_mbps),
      max_rate_mbps_(p.max_rate_mbps > 0 ? std::min(line_rate_mbps, static_cast<double>(p.max_rate_mbps))
                                         : line_rate_mbps),
      min_rate_mbps_(std::min(static_cast<double>(p.min_rate_mbps), max_rate_mbps_)),
      alpha_gain_(p.alpha_gain),
      alpha_keep_(1.0 - p.alpha_gain),
      initial_alpha_(p.initial_alpha),
      alpha_timer_ns_(us_to_ns(p.alpha_timer_us)),
      cut_period_ns_(us_to_ns(p.rate_reduce_period_us)),
      increase_timer_ns_(us_to_ns(p.increase_timer_us)),
      byte_counter_bytes_(p.byte_counter_bytes),
      fast_recovery_stages_(p.fast_recovery_stages),
      rate_ai_mbps_(p.rate_ai_mbps),
      rate_hai_mbps_(p.rate_hai_mbps),
      // rpg_gd: the firmware cuts Rc by Rc·α_fw/2^gd with α_fw = α·1024 in 1/1024 steps.
      cut_gain_(std::ldexp(1.0, 10 - static_cast<int>(p.rate_cut_gd_log2))),
      // rpg_min_dec_fac, as NVIDIA documents it: the new rate stays at least this percent of the old
      // one (25 keeps a cut above 25%, 100 disables cuts). docs/dcqcn.md, "Knobs".
      min_dec_fraction_(std::min(100u, p.min_dec_fac_pct) / 100.0),
      first_cnp_rate_mbps_(p.rate_on_first_cnp_mbps),
      clamp_target_(p.clamp_target_rate),
      clamp_target_after_timer_(p.clamp_target_rate_after_time_inc) {
  for (size_t n = 0; n < alpha_keep_pow_.size(); ++n) {
    alpha_keep_pow_[n] = std::pow(alpha_keep_, static_cast<double>(n));
  }
}

void ReactionPoint::start(RpState& s, TimeNs now) const {
  s = RpState{};
  s.rate_mbps = max_rate_mbps_;
  s.target_mbps = max_rate_mbps_;
  s.alpha_at_anchor = initial_alpha_;
  s.alpha_anchor_ns = now;
  s.last_cut_ns = kNever;
}

double ReactionPoint::alpha(const RpState& s, TimeNs now) const {
  if (alpha_timer_ns_ <= 0 || now <= s.alpha_anchor_ns) return s.alpha_at_anchor;
  // The α timer restarts at every CNP, so the decays since then are a whole number of periods.
  const TimeNs periods = (now - s.alpha_anchor_ns) / alpha_timer_ns_;
  // The table holds std::pow's own values, so both paths give identical results.
  const double decay = static_cast<size_t>(periods) < alpha_keep_pow_.size()
                           ? alpha_keep_pow_[static_cast<size_t>(periods)]
                           : std::pow(alpha_keep_, static_cast<double>(periods));
  return s.alpha_at_anchor * decay;
}

TimeNs ReactionPoint::next_event_ns(const RpState& s) const {
  if (s.last_cut_ns == kNever) return kNever;
  TimeNs e = cut_pending(s) ? s.last_cut_ns + cut_period_ns_ : kNever;
  if (!at_line_rate(s) && increase_timer_ns_ > 0) {
    e = std::min(e, s.last_cut_ns + static_cast<TimeNs>(s.timer_events + 1) * increase_timer_ns_);
  }
  return e;
}

void ReactionPoint::on_timer_slow(RpState& s, TimeNs now) const {
  if (s.last_cut_ns == kNever) return;  // never cut: at the maximum rate, nothing scheduled
  for (;;) {
    const TimeNs cut_due = cut_pending(s) ? s.last_cut_ns + cut_period_ns_ : kNever;
    // Increase events due at the same instant as a deferred cut go first.
    const TimeNs horizon = std::min(now, cut_due);
    // The compare first: most touches find no timer event due, and a division costs ~40 cycles.
    if (!at_line_rate(s) && increase_timer_ns_ > 0 &&
        horizon >= s.last_cut_ns + static_cast<TimeNs>(s.timer_events + 1) * increase_timer_ns_) {
      const auto due_events = static_cast<uint64_t>((horizon - s.last_cut_ns) / increase_timer_ns_);
      apply_increase_events(s, s.timer_events, s.byte_events, due_events - s.timer_events);
    }
    if (cut_due > now) return;
    cut(s, cut_due, alpha(s, cut_due));
  }
}

void ReactionPoint::on_cnp(RpState& s, TimeNs now) const {
  on_timer(s, now);
  const double a = alpha(s, now);
  const bool ever_cut = (s.flags & kFlagEverCut) != 0;
  // mlx5 rate_reduce_monitor_period: the first CNP of an episode cuts at once; CNPs inside the period
  // after a cut coalesce into one cut at its end.
  if (cut_period_ns_ == 0 || !ever_cut || now - s.last_cut_ns >= cut_period_ns_) {
    cut(s, now, a);
  } else {
    s.flags |= kFlagCutPending;  // coalesced: one cut at the end of the check period
  }
  // SIGCOMM'15 Alg. 1 cuts with the old α, then moves α toward 1.
  s.alpha_at_anchor = a * alpha_keep_ + alpha_gain_;
  s.alpha_anchor_ns = now;
}

void ReactionPoint::cut(RpState& s, TimeNs at, double alpha_now) const {
  const double old_rate = s.rate_mbps;
  if ((s.flags & kFlagEverCut) == 0 && first_cnp_rate_mbps_ > 0) {
    // rate_to_set_on_first_cnp: NVIDIA, "Rates (current, target) on first CNP" (docs/dcqcn.md,
    // "Knobs", [N1] [N2]): the flow's first cut sets both Rc and Rt to the knob instead of the α cut.
    // A flow that was never cut is at its maximum rate, so this is min(max, v); it never raises a
    // rate, and like every rate it stays in [min_rate, max_rate]. The clamp rules do not apply.
    const double set = std::clamp(std::min(old_rate, first_cnp_rate_mbps_), min_rate_mbps_, max_rate_mbps_);
    s.rate_mbps = set;
    s.target_mbps = set;
  } else {
    const double fraction = std::min(alpha_now * cut_gain_, 1.0);
    double new_rate = std::max(old_rate * (1.0 - fraction), old_rate * min_dec_fraction_);
    new_rate = std::clamp(new_rate, min_rate_mbps_, max_rate_mbps_);
    // mlx5 clamp_tgt_rate / clamp_tgt_rate_after_time_inc (docs/dcqcn.md, "Target rate at a cut"):
    // Rt ← Rc when the rate rose since the previous cut by the byte counter, or by the timer with
    // clamp_tgt_rate_after_time_inc. Back-to-back cuts with no increase between them keep the
    // target, so recovery heads back to where the flow was before the burst of cuts.
    if (clamp_target_ || s.byte_events > 0 || (clamp_target_after_timer_ && s.timer_events > 0)) {
      s.target_mbps = old_rate;
    }
    s.rate_mbps = new_rate;
    s.target_mbps = std::min(std::max(s.target_mbps, new_rate), max_rate_mbps_);
  }
  s.timer_events = 0;
  s.byte_events = 0;
  s.bytes_counted = 0;
  s.last_cut_ns = at;
  s.flags = (s.flags | kFlagEverCut) & ~kFlagCutPending;
}

void ReactionPoint::on_bytes_sent_slow(RpState& s, TimeNs now, uint64_t bytes) const {
  on_timer_slow(s, now);
  // byte_counter_bytes = 0 disables the byte counter (BC stays 0: no hyper increase). At the maximum
  // rate the counter is irrelevant: the next cut resets it.
  if (byte_counter_bytes_ == 0 || s.last_cut_ns == kNever || at_line_rate(s)) return;
  const uint64_t total = s.bytes_counted + bytes;
  s.bytes_counted = total % byte_counter_bytes_;
  const uint64_t events = total / byte_counter_bytes_;
  if (events > 0) apply_increase_events(s, s.byte_events, s.timer_events, events);
}

void ReactionPoint::apply_increase_events(RpState& s, uint32_t& counter, uint32_t other, uint64_t n) const {
  const uint32_t f = fast_recovery_stages_;
  while (n > 0 && !at_line_rate(s)) {
    // Split the n events into runs with a constant target step, each applied in closed form.
    // Counters include the event itself, so "≤ F" gives exactly F fast-recovery steps (SIGCOMM'15's
    // five iterations for F = 5; the HPCC Mellanox model's `stage < F` before incrementing).
    const uint64_t next = uint64_t{counter} + 1;
    double step;
    uint64_t run;
    if (next <= f && other <= f) {  // fast recovery
      step = 0;
      run = f - counter;
    } else if (next <= f) {  // additive: this counter is still in fast recovery, the other is past
      step = rate_ai_mbps_;
      run = f - counter;
    } else if (other <= f) {  // additive until the other counter passes F
      step = rate_ai_mbps_;
      run = n;
    } else if (counter >= other) {  // hyper, i = other − F for every further event
      step = static_cast<double>(other - f) * rate_hai_mbps_;
      run = n;
    } else {  // hyper with i = counter − F still growing
      step = static_cast<double>(next - f) * rate_hai_mbps_;
      run = 1;
    }
    run = std::min(run, n);
    apply_run(s, step, run);
    counter = static_cast<uint32_t>(std::min<uint64_t>(uint64_t{counter} + run, kCounterMax));
    n -= run;
  }
}

// n events of "Rt ← min(max, Rt + step); Rc ← (Rt + Rc)/2". With d = Rt − Rc, each unclamped event
// maps d to (d + step)/2, so after k events d = step + (d0 − step)·2^−k.
void ReactionPoint::apply_run(RpState& s, double step_mbps, uint64_t n) const {
  const auto halve = [](double d, uint64_t k) {
    if (k == 1) return d * 0.5;  // the usual case: one event per touch (exact, like ldexp)
    return k >= 2000 ? 0.0 : std::ldexp(d, -static_cast<int>(k));
  };
  double rt = s.target_mbps;
  double rc = s.rate_mbps;
  uint64_t unclamped = 0;
  if (step_mbps > 0 && rt < max_rate_mbps_) {
    const double to_clamp = std::ceil((max_rate_mbps_ - rt) / step_mbps);  // event that reaches max
    unclamped = to_clamp > static_cast<double>(n) ? n : static_cast<uint64_t>(to_clamp) - 1;
    if (unclamped > 0) {
      const double d = step_mbps + halve(rt - rc - step_mbps, unclamped);
      rt += static_cast<double>(unclamped) * step_mbps;
      rc = rt - d;
    }
    if (unclamped < n) {  // the clamping event
      rt = max_rate_mbps_;
      rc = (rt + rc) / 2;
      ++unclamped;
    }
  }
  const uint64_t rest = n - unclamped;  // events with a fixed target: plain halving of the gap
  if (rest > 0) rc = rt - halve(rt - rc, rest);
  s.target_mbps = rt;
  s.rate_mbps = rc;
  snap_to_max(s);
}

void ReactionPoint::snap_to_max(RpState& s) const {
  if (s.target_mbps >= max_rate_mbps_ && max_rate_mbps_ - s.rate_mbps <= kLineRateSnapMbps) {
    s.target_mbps = max_rate_mbps_;
    s.rate_mbps = max_rate_mbps_;
  }
}

}  // namespace rdmad::cc
