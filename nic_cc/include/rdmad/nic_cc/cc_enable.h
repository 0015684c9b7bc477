#pragma once
// Per-priority DCQCN enable switches of the vendor driver: /sys/class/net/<if>/ecn/roce_rp/enable/<prio>
// (reaction point: this host cuts its rate on CNPs) and .../roce_np/enable/<prio> (notification point:
// this host answers ECN marks with CNPs). Priorities are the 802.1p / traffic-class numbers 0..7.
// The upstream kernel has no such files: the switches are firmware settings there.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "rdmad/cc/dcqcn_params.h"
#include "rdmad/nic_cc/sysfs_root.h"

namespace rdmad::nic_cc {

inline constexpr int kNumPriorities = 8;

struct CcPriorityEnable {
  std::array<std::optional<bool>, kNumPriorities> rp;  // nullopt: no such file or unreadable
  std::array<std::optional<bool>, kNumPriorities> np;
};

// Reads both sides' switches of `netdev`; an error only when the netdev has no ecn/ tree at all.
SysfsResult<CcPriorityEnable> read_cc_enable(const SysfsRoot& root, std::string_view netdev);

// Turns one side's switch of one priority on or off and reads it back (true when it took).
SysfsResult<bool> set_cc_enable(const SysfsRoot& root, std::string_view netdev, cc::KnobSide side,
                                int priority, bool enabled);

}  // namespace rdmad::nic_cc
