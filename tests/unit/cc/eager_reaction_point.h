#pragma once
// Reference DCQCN reaction point that walks time step by step: every α-timer period and every
// increase-timer period is an explicit event, as in the paper's pseudocode and the naive
// one-timer-per-flow implementation. It exists to check the lazy closed-form ReactionPoint (and as
// the baseline of bench/cc); it deliberately shares no code with it.
#include <algorithm>
#include <cstdint>

#include "rdmad/cc/dcqcn_params.h"
#include "rdmad/cc/reaction_point.h"
#include "rdmad/cc/time.h"

namespace rdmad::cc::testing {

class EagerReactionPoint {
 public:
  // `p` must outlive the object (many flows share one parameter set).
  EagerReactionPoint(const DcqcnParams& p, double line_rate_mbps) : p_(&p) {
    max_ = p.max_rate_mbps > 0 ? std::min<double>(line_rate_mbps, p.max_rate_mbps) : line_rate_mbps;
    min_ = std::min<double>(p.min_rate_mbps, max_);
  }

  void start(TimeNs now) {
    rc_ = rt_ = max_;
    alpha_ = p_->initial_alpha;
    next_alpha_ns_ = p_->alpha_timer_us > 0 ? now + us_to_ns(p_->alpha_timer_us) : kNever;
    last_cut_ns_ = kNever;
    next_timer_ns_ = kNever;
    t_ = bc_ = 0;
    bytes_ = 0;
    pending_ = ever_cut_ = false;
  }

  // Runs every periodic event up to and including `now`.
  void advance(TimeNs now) {
    for (;;) {
      const TimeNs cut_due = pending_ ? last_cut_ns_ + us_to_ns(p_->rate_reduce_period_us) : kNever;
      const TimeNs t = std::min(next_timer_ns_, cut_due);
      if (t > now) break;
      decay_alpha_until(t);
      if (next_timer_ns_ <= cut_due) {
        next_timer_ns_ += us_to_ns(p_->increase_timer_us);
        ++t_;
        increase();
      } else {
        cut(cut_due);
      }
    }
    decay_alpha_until(now);
  }

  void on_cnp(TimeNs now) {
    advance(now);
    const TimeNs period = us_to_ns(p_->rate_reduce_period_us);
    if (period == 0 || !ever_cut_ || now - last_cut_ns_ >= period) {
      cut(now);
    } else {
      pending_ = true;
    }
    alpha_ = alpha_ * (1 - p_->alpha_gain) + p_->alpha_gain;
    next_alpha_ns_ = p_->alpha_timer_us > 0 ? now + us_to_ns(p_->alpha_timer_us) : kNever;
  }

  void on_bytes_sent(TimeNs now, uint64_t bytes) {
    advance(now);
    if (p_->byte_counter_bytes == 0 || !ever_cut_) return;
    bytes_ += bytes;
    while (bytes_ >= p_->byte_counter_bytes) {
      bytes_ -= p_->byte_counter_bytes;
      ++bc_;
      increase();
    }
  }

  double rate_mbps() const { return rc_; }
  double target_mbps() const { return rt_; }
  double alpha() const { return alpha_; }
  TimeNs last_cut_ns() const { return last_cut_ns_; }
  // Increase events applied while below the maximum rate (for benchmarks).
  uint64_t increases_below_max() const { return increases_; }
  bool cut_pending() const { return pending_; }

 private:
  void decay_alpha_until(TimeNs t) {
    while (next_alpha_ns_ <= t) {
      alpha_ *= 1 - p_->alpha_gain;
      next_alpha_ns_ += us_to_ns(p_->alpha_timer_us);
    }
  }

  void cut(TimeNs at) {
    const double old = rc_;
    double next;
    const bool set_on_first = !ever_cut_ && p_->rate_on_first_cnp_mbps > 0;
    if (set_on_first) {
      next = std::min<double>(old, p_->rate_on_first_cnp_mbps);
    } else {
      double frac = alpha_ * static_cast<double>(1u << 10) / static_cast<double>(1u << p_->rate_cut_gd_log2);
      frac = std::min(frac, 1.0);
      next = std::max(old * (1 - frac), old * std::min(100u, p_->min_dec_fac_pct) / 100.0);
    }
    next = std::clamp(next, min_, max_);
    if (set_on_first) {
      rt_ = next;  // "Rates (current, target) on first CNP": both, no clamp rules
    } else if (p_->clamp_target_rate || bc_ > 0 || (p_->clamp_target_rate_after_time_inc && t_ > 0)) {
      rt_ = old;
    }
    rc_ = next;
    rt_ = std::min(std::max(rt_, rc_), max_);
    t_ = bc_ = 0;
    bytes_ = 0;
    last_cut_ns_ = at;
    next_timer_ns_ = p_->increase_timer_us > 0 ? at + us_to_ns(p_->increase_timer_us) : kNever;
    pending_ = false;
    ever_cut_ = true;
  }

  void increase() {
    if (rc_ < max_) ++increases_;
    const uint32_t f = p_->fast_recovery_stages;
    if (std::max(t_, bc_) <= f) {
      // fast recovery: Rt unchanged
    } else if (std::min(t_, bc_) <= f) {
      rt_ = std::min(max_, rt_ + p_->rate_ai_mbps);
    } else {
      rt_ = std::min(max_, rt_ + static_cast<double>(std::min(t_, bc_) - f) * p_->rate_hai_mbps);
    }
    rc_ = (rt_ + rc_) / 2;
    if (rt_ >= max_ && max_ - rc_ <= kLineRateSnapMbps) rc_ = max_;
  }

  const DcqcnParams* p_;
  double max_ = 0, min_ = 0;
  double rc_ = 0, rt_ = 0, alpha_ = 0;
  TimeNs next_alpha_ns_ = kNever, next_timer_ns_ = kNever, last_cut_ns_ = kNever;
  uint32_t t_ = 0, bc_ = 0;
  uint64_t bytes_ = 0;
  uint64_t increases_ = 0;
  bool pending_ = false, ever_cut_ = false;
};

}  // namespace rdmad::cc::testing
