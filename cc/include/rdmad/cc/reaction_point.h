#pragma once
// DCQCN reaction point (the sender side, per QP): SIGCOMM'15 §3.3 with the mlx5 firmware's
// extensions (rate-cut check period, min_dec_fac, clamp flags, rate on first CNP).
//
// The state is plain data owned by the caller (one per QP, ≤ 64 bytes); ReactionPoint holds only
// the derived parameters (about 4 KB with its α-decay table) and is shared by all flows. There are no
// per-flow periodic timers: α decay is a closed form of the time since the last CNP, and increase events that
// fell due since the flow was last touched are applied in closed form on the next touch. A flow below its
// maximum rate has exactly one next event (next_event_ns); a flow at its maximum rate has none.
//
// Semantic choices (the reasons are in docs/dcqcn.md):
// - Events at the same instant apply in the order: α decay, increase events, deferred cut, then
//   the call's own event (a CNP or sent bytes).
// - A cut uses α as it is at the cut; the CNP's α update (α ← (1−g)α + g) follows the cut.
// - Increase phase of an event, with T and BC counted after the event: fast recovery while
//   max(T, BC) ≤ F (F fast-recovery steps), hyper increase once min(T, BC) > F with
//   i = min(T, BC) − F, additive increase otherwise.
// - A rate within kLineRateSnapMbps of the maximum rate, with the target at the maximum, is the
//   maximum rate: the flow leaves recovery and has no further events.
// - Time must not go backwards between calls on one state.
#include <array>
#include <cstdint>

#include "rdmad/cc/dcqcn_params.h"
#include "rdmad/cc/time.h"

namespace rdmad::cc {

// Rates are held in Mb/s like the firmware's knobs; closer than this to the maximum is the maximum.
inline constexpr double kLineRateSnapMbps = 1.0;

struct RpState {
  double rate_mbps = 0;         // Rc, the pacing rate
  double target_mbps = 0;       // Rt
  double alpha_at_anchor = 0;   // α at alpha_anchor_ns (decays every K since then)
  TimeNs alpha_anchor_ns = 0;   // last CNP (or start)
  TimeNs last_cut_ns = kNever;  // last rate cut; the increase timer and byte counter restart here
  uint64_t bytes_counted = 0;   // bytes since the last byte-counter event
  uint32_t timer_events = 0;    // T: increase-timer events since the last cut
  uint32_t byte_events = 0;     // BC: byte-counter events since the last cut
  uint32_t flags = 0;           // kFlag* below
};
static_assert(sizeof(RpState) <= 64, "RpState must fit one cache line");

class ReactionPoint {
 public:
  static constexpr uint32_t kFlagCutPending = 1u << 0;  // a CNP arrived inside the check period
  static constexpr uint32_t kFlagEverCut = 1u << 1;     // the flow has had its first cut

  // `line_rate_mbps`: the port speed. The maximum rate is min(line rate, max_rate_mbps when set).
  ReactionPoint(const DcqcnParams& params, double line_rate_mbps);

  // A new flow at `now`: at its maximum rate, α = initial_alpha, no events.
  void start(RpState& s, TimeNs now) const;

  // A CNP for this flow arrived at `now`. Cuts now, or (inside the rate-cut check period) once at
  // the end of the period; α ← (1−g)α + g either way.
  void on_cnp(RpState& s, TimeNs now) const;

  // The flow put `bytes` on the wire at `now` (feeds the byte counter).
  void on_bytes_sent(RpState& s, TimeNs now, uint64_t bytes) const {
    if (!idle(s)) on_bytes_sent_slow(s, now, bytes);  // a recovered flow ignores its bytes
  }

  // Applies every event due up to and including `now` (increase events, a deferred cut). Safe to
  // call at any time; the usual caller is a timing wheel firing at next_event_ns().
  void on_timer(RpState& s, TimeNs now) const {
    if (!idle(s)) on_timer_slow(s, now);
  }

  // Rc, the rate to pace at, as of the last call that touched the state.
  double rate_mbps(const RpState& s) const { return s.rate_mbps; }
  // Rt, the target rate.
  double target_mbps(const RpState& s) const { return s.target_mbps; }
  // α at `now` (closed-form decay since the last CNP; does not modify the state).
  double alpha(const RpState& s, TimeNs now) const;
  // When on_timer() next has something to do; kNever when at the maximum rate with no cut pending.
  TimeNs next_event_ns(const RpState& s) const;

  // True when the flow is at its maximum rate (it then needs no timer and its pacer may bypass).
  bool at_line_rate(const RpState& s) const { return s.rate_mbps >= max_rate_mbps_; }
  bool cut_pending(const RpState& s) const { return (s.flags & kFlagCutPending) != 0; }
  TimeNs last_cut_ns(const RpState& s) const { return s.last_cut_ns; }

  double line_rate_mbps() const { return line_rate_mbps_; }
  // min(line rate, max_rate_mbps when set): the rate a recovered flow returns to.
  double max_rate_mbps() const { return max_rate_mbps_; }
  double min_rate_mbps() const { return min_rate_mbps_; }

 private:
  // At the maximum rate with no cut pending: nothing can happen until the next CNP (the fast path
  // of most packets; the checks are inline, the work out of line).
  bool idle(const RpState& s) const { return at_line_rate(s) && (s.flags & kFlagCutPending) == 0; }
  void on_timer_slow(RpState& s, TimeNs now) const;
  void on_bytes_sent_slow(RpState& s, TimeNs now, uint64_t bytes) const;
  void cut(RpState& s, TimeNs at, double alpha_now) const;
  // Applies `n` consecutive events of one counter (`counter` is T or BC, `other` the other one).
  void apply_increase_events(RpState& s, uint32_t& counter, uint32_t other, uint64_t n) const;
  void apply_run(RpState& s, double step_mbps, uint64_t n) const;
  void snap_to_max(RpState& s) const;

  double line_rate_mbps_;
  double max_rate_mbps_;
  double min_rate_mbps_;
  double alpha_gain_;
  double alpha_keep_;  // 1 − g
  double initial_alpha_;
  TimeNs alpha_timer_ns_;     // K; 0 disables decay
  TimeNs cut_period_ns_;      // rate-cut check period; 0 cuts on every CNP
  TimeNs increase_timer_ns_;  // 0 disables the timer
  uint64_t byte_counter_bytes_;
  uint32_t fast_recovery_stages_;
  double rate_ai_mbps_;
  double rate_hai_mbps_;
  double cut_gain_;             // 2^(10 − gd): the cut is Rc·α·cut_gain (α/2 for gd = 11)
  double min_dec_fraction_;     // min_dec_fac_pct / 100: a cut keeps Rc ≥ Rc_old·this
  double first_cnp_rate_mbps_;  // 0: normal cut
  bool clamp_target_;
  bool clamp_target_after_timer_;
  std::array<double, 512> alpha_keep_pow_;  // (1 − g)^n: α decay without a pow() per CNP
};

}  // namespace rdmad::cc
