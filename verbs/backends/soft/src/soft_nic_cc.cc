// DCQCN on the soft datapath: the notification point answers CE-marked data packets with CNPs to
// the sender's QP, the reaction point adjusts each QP's rate on CNPs and sent bytes, and the pacer
// spaces each QP's data packets at that rate. Per-QP state lives in QpContext; the algorithms are
// the cc/ ones shared with the simulator.
#include <algorithm>

#include "soft_nic.h"

namespace rdmad::verbs::soft {

bool SoftNic::may_send_data(const QpContext& qp, TimeNs now) const {
  if (!config_.cc_enabled || rp_.at_line_rate(qp.rp)) return true;
  return pacer_.may_send(qp.pacer, now);
}

void SoftNic::on_data_sent(QpContext& qp, TimeNs now, size_t bytes) {
  if (!config_.cc_enabled) return;
  rp_.on_bytes_sent(qp.rp, now, bytes);
  if (rp_.at_line_rate(qp.rp)) return;
  // A user-space thread wakes late (timer slack, scheduling); departures owed since then may go
  // out back to back, up to kPacingCatchUpNs worth, so the achieved rate is the DCQCN rate.
  TimeNs from = std::max(qp.pacer.next_departure_ns, now - kPacingCatchUpNs);
  qp.paced_rate_mbps = rp_.rate_mbps(qp.rp);
  pacer_.on_departure(qp.pacer, from, bytes, qp.paced_rate_mbps);
}

void SoftNic::on_ce_marked(QpContext& qp, TimeNs now) {
  if (np_.on_ce_packet(qp.np, now)) send_cnp(qp);
}

void SoftNic::on_cnp(QpContext& qp, TimeNs now) { rp_.on_cnp(qp.rp, now); }

void SoftNic::set_dcqcn_params(const cc::DcqcnParams& params) {
  // config_.dcqcn is read only here and on this thread (send_cnp, dcqcn_params() through run()).
  config_.dcqcn = params;
  const double old_max = rp_.max_rate_mbps();
  rp_ = cc::ReactionPoint(params, config_.line_rate_mbps);
  np_ = cc::NotificationPoint(params);
  // Rates were reached under the old ceiling: a QP that sat at it moves to the new one (it is
  // "at line rate" only at exactly the ceiling), and no QP keeps a rate above the new one.
  const double new_max = rp_.max_rate_mbps();
  for (auto& qp : qps_) {
    if (!qp) continue;
    cc::RpState& s = qp->rp;
    if (s.rate_mbps >= old_max || s.rate_mbps > new_max) s.rate_mbps = new_max;
    if (s.target_mbps >= old_max || s.target_mbps > new_max) s.target_mbps = new_max;
  }
}

void SoftNic::cc_timers(QpContext& qp, TimeNs now, TimeNs* next_deadline) {
  if (qp.state != QpState::kRts && qp.state != QpState::kRtr) return;
  TimeNs due = np_.deferred_cnp_due(qp.np);
  if (due <= now && np_.on_timer(qp.np, now)) send_cnp(qp);
  due = np_.deferred_cnp_due(qp.np);
  if (due < *next_deadline) *next_deadline = due;
  TimeNs rp_due = rp_.next_event_ns(qp.rp);
  if (rp_due <= now) {
    rp_.on_timer(qp.rp, now);
    rp_due = rp_.next_event_ns(qp.rp);
  }
  if (rp_due < *next_deadline) *next_deadline = rp_due;
  // An increase (here, or applied when the rates were sampled) also speeds up the departure the
  // pacer holds back; this pass's transmit step has run, so the new time goes into the deadline.
  const double rate = rp_.rate_mbps(qp.rp);
  if (rate > qp.paced_rate_mbps && qp.pacer.next_departure_ns > now) {
    pacer_.on_rate_raised(qp.pacer, now, qp.paced_rate_mbps, rate);
    qp.paced_rate_mbps = rate;
    const TimeNs send_at = rp_.at_line_rate(qp.rp) ? now : qp.pacer.next_departure_ns;
    if (send_at < *next_deadline) *next_deadline = send_at;
  }
}

void SoftNic::dcqcn_samples(std::vector<DcqcnSample>& out) {
  const TimeNs now = loop_now_;
  for (const auto& qp : qps_) {
    if (qp == nullptr || qp->state != QpState::kRts) continue;
    // Applies the increase events and a deferred cut that fell due since the datapath last touched
    // the flow, so an idle flow reports the rate it would send at now.
    rp_.on_timer(qp->rp, now);
    out.push_back({rp_.rate_mbps(qp->rp), rp_.target_mbps(qp->rp), rp_.alpha(qp->rp, now)});
  }
}

}  // namespace rdmad::verbs::soft
