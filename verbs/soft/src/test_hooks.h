#pragma once
// Test-only views of a soft device's datapath. Tests include this from the backend's src/ (it is
// not part of the backend's public header).
#include <cstddef>
#include <cstdint>

#include "rdmad/verbs/device.h"

namespace rdmad::verbs::soft {

/// Loop passes a soft NIC's datapath has run, and the QP visits they made (a transmit turn, or
/// one of its timers handled).
struct PassStats {
  uint64_t passes = 0;
  uint64_t qps_visited = 0;
  size_t timers_scheduled = 0;  // on the NIC's timing wheel, now
};

/// The pass counts of `dev`, which the soft backend opened (one pass of its own to read them).
PassStats pass_stats_for_test(const Device& dev);

}  // namespace rdmad::verbs::soft
