// Which QPs a loop pass touches. A pass gives a transmit turn only to the QPs on active_: those
// posted to (a bit per QP set by the posting thread), those a packet arrived for, and those one of
// their timers woke; a QP that sends nothing in a turn leaves the list. Everything time-driven —
// retransmit timeouts, pacing departures and RNR waits, the DCQCN reaction and notification
// points' events — is a timer on the NIC's one timing wheel (cc::TimingWheel, O(1) insert, cancel
// and expiry), so a pass costs O(QPs with work) rather than O(QPs), and the loop sleeps until the
// wheel's next expiry.
#include <bit>

#include "soft_nic.h"

namespace rdmad::verbs::soft {
namespace {

cc::TimerId timer_id(const QpContext& qp, QpTimer timer) { return qp_index(qp.qpn) * kQpTimers + timer; }

}  // namespace

void SoftNic::doorbell(uint32_t qpn) {
  const uint32_t i = qp_index(qpn);
  // After the post's own release store: whoever takes the bit (acquire) sees the work requests.
  posted_[i / 64].fetch_or(uint64_t{1} << (i % 64), std::memory_order_acq_rel);
  doorbell();
}

void SoftNic::collect_posted() {
  for (uint32_t w = 0; w < posted_.size(); ++w) {
    // A plain load first: most words are 0 on most passes, and the exchange would take the line.
    if (posted_[w].load(std::memory_order_relaxed) == 0) continue;
    for (uint64_t bits = posted_[w].exchange(0, std::memory_order_acq_rel); bits != 0; bits &= bits - 1) {
      QpContext* qp = qps_[w * 64 + static_cast<uint32_t>(std::countr_zero(bits))].get();
      if (qp != nullptr) activate(*qp);
    }
  }
}

void SoftNic::activate(QpContext& qp) {
  if (qp.active) return;
  qp.active = true;
  active_.push_back(&qp);  // reserved for kMaxQps: never allocates
}

void SoftNic::arm(QpContext& qp, QpTimer timer, TimeNs due) {
  if (due >= qp.timer_due[timer]) return;  // also kNever
  qp.timer_due[timer] = due;
  wheel_.insert(timer_id(qp, timer), due);
}

void SoftNic::disarm(QpContext& qp, QpTimer timer) {
  if (qp.timer_due[timer] == cc::kNever) return;
  wheel_.cancel(timer_id(qp, timer));
  qp.timer_due[timer] = cc::kNever;
}

void SoftNic::cancel_timers(QpContext& qp) {
  for (uint32_t t = 0; t < kQpTimers; ++t) disarm(qp, static_cast<QpTimer>(t));
}

void SoftNic::fire_timers(TimeNs now) {
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

bool SoftNic::transmit(TimeNs now, bool* drained) {
  // Round robin: each QP sends a few packets per round so one long message does not starve others.
  // A QP that sends nothing in a round is blocked (window, pacer, RNR wait, nothing queued) by
  // something no later round of this pass can change: it leaves the list.
  bool any = false;
  *drained = false;
  for (int round = 0; round < 16 && !*drained && !active_.empty(); ++round) {
    bool progress = false;
    size_t kept = 0;
    for (QpContext* qp : active_) {
      ++qps_visited_;
      qp->cq_full = false;
      bool sent = responder_tx(*qp, now, 16);
      sent |= requester_tx(*qp, now, 16);
      progress |= sent;
      if (sent || qp->cq_full) {
        active_[kept++] = qp;  // order kept: the rounds stay fair
      } else {
        park(*qp, now);
      }
    }
    active_.resize(kept);
    any |= progress;
    *drained = !progress;
  }
  if (active_.empty()) *drained = true;
  return any;
}

void SoftNic::park(QpContext& qp, TimeNs now) {
  qp.active = false;
  // A packet or a post brings it back; so do these, for what only time ends.
  if (qp.state == QpState::kRts && now < qp.rnr_until_ns) arm(qp, kSendTimer, qp.rnr_until_ns);
  const bool queued = (qp.state == QpState::kRts && qp.send_idx < qp.accepted) || qp.resp_count > 0;
  if (queued && !may_send_data(qp, now)) arm(qp, kSendTimer, qp.pacer.next_departure_ns);
}

void SoftNic::after_modify(QpContext& qp) {
  activate(qp);
  if (qp.state == QpState::kRts) arm(qp, kRetransmitTimer, loop_now_);
}

}  // namespace rdmad::verbs::soft
