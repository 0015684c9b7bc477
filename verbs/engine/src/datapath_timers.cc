// Which QPs a loop pass touches. A pass gives a transmit turn only to the QPs on active_: those
// posted to (a bit per QP set by the posting thread), those a packet arrived for, and those one of
// their timers woke; a QP that sends nothing in a turn leaves the list. Everything time-driven —
// retransmit timeouts, pacing departures and RNR waits, the DCQCN reaction and notification
// points' events — is a timer on the datapath's one timing wheel (cc::TimingWheel, O(1) insert, cancel
// and expiry), so a pass costs O(QPs with work) rather than O(QPs), and the loop sleeps until the
// wheel's next expiry.
#include <algorithm>
#include <bit>

#include "datapath.h"

namespace rdmad::verbs::engine {
namespace {

cc::TimerId timer_id(const QpContext& qp, QpTimer timer) { return qp.slot * kQpTimers + timer; }

}  // namespace

void Datapath::collect_posted() {
  posted_.take([this](uint32_t slot) {
    QpContext* qp = qps_[slot].get();
    if (qp != nullptr) activate(*qp);
  });
}

void Datapath::activate(QpContext& qp) {
  if (qp.active) return;
  qp.active = true;
  active_.push_back(&qp);  // reserved for every slot: never allocates
}

void Datapath::arm(QpContext& qp, QpTimer timer, TimeNs due) {
  if (due >= qp.timer_due[timer]) return;  // also kNever
  qp.timer_due[timer] = due;
  wheel_.insert(timer_id(qp, timer), due);
}

void Datapath::disarm(QpContext& qp, QpTimer timer) {
  if (qp.timer_due[timer] == cc::kNever) return;
  wheel_.cancel(timer_id(qp, timer));
  qp.timer_due[timer] = cc::kNever;
}

void Datapath::cancel_timers(QpContext& qp) {
  for (uint32_t t = 0; t < kQpTimers; ++t) disarm(qp, static_cast<QpTimer>(t));
}

void Datapath::fire_timers(TimeNs now) {
  wheel_.advance(now, [this, now](cc::TimerId id, TimeNs) {
    QpContext* qp = qps_[id / kQpTimers].get();
    if (qp == nullptr) return;  // removed QPs cancel their timers; kept for safety
    const auto timer = static_cast<QpTimer>(id % kQpTimers);
    qp->timer_due[timer] = cc::kNever;
    ++qps_visited_;
    switch (timer) {
      case kRetransmitTimer: retransmit_timer(*qp, now); break;
      case kSendTimer: activate(*qp); break;
      case kReactionTimer: reaction_timer(*qp, now); break;
      case kNotificationTimer: notification_timer(*qp, now); break;
      case kQpTimers: break;
    }
  });
}

bool Datapath::transmit(TimeNs now, bool* drained) {
  // Round robin: each QP sends a few packets per round so one long message does not starve others.
  // A QP that sends nothing in a round is blocked (window, pacer, RNR wait, nothing queued) by
  // something no later round of this pass can change: it leaves the list. A pass sends at most
  // kPassPacketBudget packets (what one QP's 16 rounds of 16 come to): with hundreds of busy QPs
  // an unbounded pass took longer than their retransmit timeout before it read their ACKs again.
  // The QPs a cut-short round did not reach go first in the next pass.
  bool any = false;
  *drained = false;
  const uint64_t tx0 = counters_.tx_packets;
  for (int round = 0; round < kPassRounds && !*drained && !active_.empty(); ++round) {
    bool progress = false;
    size_t kept = 0;
    size_t i = 0;
    for (; i < active_.size(); ++i) {
      if (counters_.tx_packets - tx0 >= kPassPacketBudget) break;
      QpContext* qp = active_[i];
      ++qps_visited_;
      qp->cq_full = false;
      bool sent = responder_tx(*qp, now, kTurnPackets);
      sent |= requester_tx(*qp, now, kTurnPackets);
      progress |= sent;
      if (sent || qp->cq_full) {
        active_[kept++] = qp;  // order kept: the rounds stay fair
      } else {
        park(*qp, now);
      }
    }
    any |= progress;
    if (i < active_.size()) {
      // Budget spent: the QPs not reached keep their turn and lead the next pass.
      const size_t rest = active_.size() - i;
      std::copy(active_.begin() + static_cast<ptrdiff_t>(i), active_.end(),
                active_.begin() + static_cast<ptrdiff_t>(kept));
      std::rotate(active_.begin(), active_.begin() + static_cast<ptrdiff_t>(kept),
                  active_.begin() + static_cast<ptrdiff_t>(kept + rest));
      active_.resize(kept + rest);
      return any;
    }
    active_.resize(kept);
    *drained = !progress;
    if (counters_.tx_packets - tx0 >= kPassPacketBudget) return any;
  }
  if (active_.empty()) *drained = true;
  return any;
}

void Datapath::park(QpContext& qp, TimeNs now) {
  qp.active = false;
  // A packet or a post brings it back; so do these, for what only time ends.
  if (qp.state == QpState::kRts && now < qp.rnr_until_ns) arm(qp, kSendTimer, qp.rnr_until_ns);
  const bool queued = (qp.state == QpState::kRts && qp.send_idx < qp.accepted) || qp.resp_count > 0;
  if (queued && !may_send_data(qp, now)) arm(qp, kSendTimer, qp.pacer.next_departure_ns);
}

void Datapath::after_modify(QpContext& qp) {
  activate(qp);
  if (qp.state == QpState::kRts) arm(qp, kRetransmitTimer, loop_now_);
}

}  // namespace rdmad::verbs::engine
