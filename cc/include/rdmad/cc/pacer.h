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

  // The flow's rate rose from `old_rate_mbps` to `new_rate_mbps` at `now` while a departure is
  // held back: the part of the gap still to run goes at the new rate, as a NIC's rate limiter
  // applies a new rate to the packet it is holding. Without it a flow cut to a few Mb/s would wait
  // out the gap of its slowest rate (33 ms for 4 KiB at 1 Mb/s) however fast it recovers. A lower
  // rate leaves the gap as it is: the cut applies from the next departure.
  void on_rate_raised(PacerState& s, TimeNs now, double old_rate_mbps, double new_rate_mbps) const {
    if (!(new_rate_mbps > old_rate_mbps) || old_rate_mbps <= 0 || s.next_departure_ns <= now) return;
    const double left = static_cast<double>(s.next_departure_ns - now) * (old_rate_mbps / new_rate_mbps);
    const auto whole = static_cast<TimeNs>(left);
    s.next_departure_ns = now + whole;
    s.carry_ns = left - static_cast<double>(whole);
  }

  double line_rate_mbps() const { return line_rate_mbps_; }

 private:
  double line_rate_mbps_;
};

}  // namespace rdmad::cc
