#include "rdmad/cc/notification_point.h"

namespace rdmad::cc {

NotificationPoint::NotificationPoint(const DcqcnParams& params)
    : interval_ns_(us_to_ns(params.np_cnp_interval_us)) {}

bool NotificationPoint::on_ce_packet(NpState& s, TimeNs now) const {
  if (s.last_cnp_ns == kNever || now - s.last_cnp_ns >= interval_ns_) {
    s.last_cnp_ns = now;
    s.mark_pending = false;  // this CNP answers any older mark too
    return true;
  }
  s.mark_pending = true;
  return false;
}

TimeNs NotificationPoint::deferred_cnp_due(const NpState& s) const {
  return s.mark_pending ? s.last_cnp_ns + interval_ns_ : kNever;
}

bool NotificationPoint::on_timer(NpState& s, TimeNs now) const {
  if (!s.mark_pending || now - s.last_cnp_ns < interval_ns_) return false;
  s.last_cnp_ns = now;
  s.mark_pending = false;
  return true;
}

}  // namespace rdmad::cc
