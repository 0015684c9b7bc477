// DCQCN on the soft datapath: the notification point answers CE-marked data packets with CNPs to
// the sender's QP, the reaction point adjusts each QP's rate on CNPs and sent bytes, and the pacer
// spaces each QP's data packets at that rate. Per-QP state lives in QpContext; the algorithms are
// the cc/ ones shared with the simulator.
#include <algorithm>

#include "datapath.h"

namespace rdmad::verbs::engine {

bool Datapath::may_send_data(const QpContext& qp, TimeNs now) const {
  if (!cc_enabled_ || rp_.at_line_rate(qp.rp)) return true;
  return pacer_.may_send(qp.pacer, now);
}

void Datapath::on_data_sent(QpContext& qp, TimeNs now, size_t bytes) {
  if (!cc_enabled_) return;
  rp_.on_bytes_sent(qp.rp, now, bytes);
  if (rp_.at_line_rate(qp.rp)) return;
  arm(qp, kReactionTimer, rp_.next_event_ns(qp.rp));
  // A user-space thread wakes late (timer slack, scheduling); departures owed since then may go
  // out back to back, up to kPacingCatchUpNs worth, so the achieved rate is the DCQCN rate.
  TimeNs from = std::max(qp.pacer.next_departure_ns, now - kPacingCatchUpNs);
  qp.paced_rate_mbps = rp_.rate_mbps(qp.rp);
  pacer_.on_departure(qp.pacer, from, bytes, qp.paced_rate_mbps);
}

void Datapath::on_ce_marked(QpContext& qp, TimeNs now) {
  if (np_.on_ce_packet(qp.np, now)) {
    send_cnp(qp);
  } else {
    arm(qp, kNotificationTimer, np_.deferred_cnp_due(qp.np));
  }
}

void Datapath::on_cnp(QpContext& qp, TimeNs now) {
  rp_.on_cnp(qp.rp, now);
  arm(qp, kReactionTimer, rp_.next_event_ns(qp.rp));
}

void Datapath::set_dcqcn_params(const cc::DcqcnParams& params) {
  dcqcn_ = params;  // this thread's copy (send_cnp)
  const double old_max = rp_.max_rate_mbps();
  rp_ = cc::ReactionPoint(params, nic_.config().line_rate_mbps);
  np_ = cc::NotificationPoint(params);
  // Rates were reached under the old ceiling: a QP that sat at it moves to the new one (it is
  // "at line rate" only at exactly the ceiling), and no QP keeps a rate above the new one.
  const double new_max = rp_.max_rate_mbps();
  for (auto& qp : qps_) {
    if (!qp) continue;
    cc::RpState& s = qp->rp;
    if (s.rate_mbps >= old_max || s.rate_mbps > new_max) s.rate_mbps = new_max;
    if (s.target_mbps >= old_max || s.target_mbps > new_max) s.target_mbps = new_max;
    // The new parameters move every event: the timers look again in the next pass and re-arm.
    arm(*qp, kReactionTimer, loop_now_);
    arm(*qp, kNotificationTimer, loop_now_);
  }
}

void Datapath::notification_timer(QpContext& qp, TimeNs now) {
  if (!cc_enabled_) return;
  if (qp.state != QpState::kRts && qp.state != QpState::kRtr) return;
  if (np_.deferred_cnp_due(qp.np) <= now && np_.on_timer(qp.np, now)) send_cnp(qp);
  arm(qp, kNotificationTimer, np_.deferred_cnp_due(qp.np));
}

void Datapath::reaction_timer(QpContext& qp, TimeNs now) {
  if (!cc_enabled_) return;
  if (qp.state != QpState::kRts && qp.state != QpState::kRtr) return;
  rp_.on_timer(qp.rp, now);
  arm(qp, kReactionTimer, rp_.next_event_ns(qp.rp));
  repace(qp, now);
}

void Datapath::repace(QpContext& qp, TimeNs now) {
  // An increase (here, or applied when the rates were sampled) also speeds up the departure the
  // pacer holds back; the QP then sends at the new time (at once if back at line rate).
  const double rate = rp_.rate_mbps(qp.rp);
  if (!(rate > qp.paced_rate_mbps) || qp.pacer.next_departure_ns <= now) return;
  pacer_.on_rate_raised(qp.pacer, now, qp.paced_rate_mbps, rate);
  qp.paced_rate_mbps = rate;
  if (rp_.at_line_rate(qp.rp)) {
    activate(qp);
  } else {
    arm(qp, kSendTimer, qp.pacer.next_departure_ns);
  }
}

void Datapath::dcqcn_samples(std::vector<DcqcnSample>& out) {
  const TimeNs now = loop_now_;
  for (const auto& qp : qps_) {
    if (qp == nullptr || qp->state != QpState::kRts) continue;
    // Applies the increase events and a deferred cut that fell due since the datapath last touched
    // the flow, so an idle flow reports the rate it would send at now.
    rp_.on_timer(qp->rp, now);
    arm(*qp, kReactionTimer, now);  // the next pass re-paces a rate this raised
    out.push_back({rp_.rate_mbps(qp->rp), rp_.target_mbps(qp->rp), rp_.alpha(qp->rp, now)});
  }
}

}  // namespace rdmad::verbs::engine
