#pragma once
// DCQCN notification point (the receiver side, per QP), SIGCOMM'15 §3.2: on a CE-marked data packet,
// send a CNP to the sender's QP unless one went out in the last N µs; a mark inside the interval is
// remembered and answered by at most one CNP when the interval ends. N = np_cnp_interval_us
// (mlx5 `min_time_between_cnps`); N = 0 answers every marked packet.
#include <cstdint>

#include "rdmad/cc/dcqcn_params.h"
#include "rdmad/cc/time.h"

namespace rdmad::cc {

struct NpState {
  TimeNs last_cnp_ns = kNever;  // when the last CNP went out; kNever: none yet
  bool mark_pending = false;    // a CE mark arrived inside the interval and is not answered yet
};
static_assert(sizeof(NpState) <= 16);

class NotificationPoint {
 public:
  explicit NotificationPoint(const DcqcnParams& params);

  // A CE-marked data packet of this QP arrived at `now`. True: send a CNP now (the state records
  // it). False: the mark is remembered; deferred_cnp_due() says when to call on_timer().
  bool on_ce_packet(NpState& s, TimeNs now) const;

  // When the remembered mark's CNP may go out; kNever if no mark is pending.
  TimeNs deferred_cnp_due(const NpState& s) const;

  // True: send the remembered CNP now (due and pending; the state records it). Sends are spaced
  // by at least N even when this is called late: the interval restarts at the actual send time.
  bool on_timer(NpState& s, TimeNs now) const;

  TimeNs interval_ns() const { return interval_ns_; }

 private:
  TimeNs interval_ns_;
};

}  // namespace rdmad::cc
