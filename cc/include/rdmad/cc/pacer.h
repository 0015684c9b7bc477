#pragma once
// Per-flow pacing: the next time a flow may put a packet on the wire, given its DCQCN rate. A flow
// at line rate with nothing queued bypasses the pacing wheel: the port's own serialization paces
// it, and the wheel is only for flows whose departures must be spread out.
#include <cstdint>

#include "rdmad/cc/time.h"

namespace rdmad::cc {

struct PacerState {
  TimeNs next_departure_ns = 0;  // earliest time of the next departure
  double carry_ns = 0;           // sub-nanosecond remainder, so long runs do not drift
};
static_assert(sizeof(PacerState) <= 16);

class Pacer {
 public:
  explicit Pacer(double line_rate_mbps) : line_rate_mbps_(line_rate_mbps) {}

  // Wire time of `bytes` at `rate_mbps` (Mb/s = bits per µs), in ns, fractional.
  static double serialization_ns(uint64_t bytes, double rate_mbps) {
    return static_cast<double>(bytes) * 8000.0 / rate_mbps;
  }

  // True: the flow may send at once without a wheel entry (at line rate, nothing waiting).
  bool bypasses_wheel(double rate_mbps, bool has_queued) const {
    return rate_mbps >= line_rate_mbps_ && !has_queued;
  }

  // True when the flow may send at `now`.
  bool may_send(const PacerState& s, TimeNs now) const { return now >= s.next_departure_ns; }

  // Records that `bytes` left at `now` at `rate_mbps`; returns the next departure time. A flow
  // that was idle does not bank credit: the gap starts at `now`, not at the old departure time.
  TimeNs on_departure(PacerState& s, TimeNs now, uint64_t bytes, double rate_mbps) const {
    if (now > s.next_departure_ns) {
      s.next_departure_ns = now;
      s.carry_ns = 0;
    }
    const double gap = serialization_ns(bytes, rate_mbps) + s.carry_ns;
    const auto whole = static_cast<TimeNs>(gap);
    s.carry_ns = gap - static_cast<double>(whole);
    s.next_departure_ns += whole;
    return s.next_departure_ns;
  }

  double line_rate_mbps() const { return line_rate_mbps_; }

 private:
  double line_rate_mbps_;
};

}  // namespace rdmad::cc
