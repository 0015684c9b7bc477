#include "rdmad/nic_cc/cc_enable.h"

#include <fmt/format.h>

namespace rdmad::nic_cc {

namespace {

std::string enable_path(std::string_view netdev, cc::KnobSide side, int prio) {
  return fmt::format("/sys/class/net/{}/ecn/{}/enable/{}", netdev,
                     side == cc::KnobSide::kReactionPoint ? "roce_rp" : "roce_np", prio);
}

}  // namespace

SysfsResult<CcPriorityEnable> read_cc_enable(const SysfsRoot& root, std::string_view netdev) {
  const std::string base = fmt::format("/sys/class/net/{}/ecn", netdev);
  if (!root.exists(base)) return SysfsError{base, ENOENT, {}};
  CcPriorityEnable out;
  for (int p = 0; p < kNumPriorities; ++p) {
    if (auto v = root.read_u64(enable_path(netdev, cc::KnobSide::kReactionPoint, p))) out.rp[p] = *v != 0;
    if (auto v = root.read_u64(enable_path(netdev, cc::KnobSide::kNotificationPoint, p))) out.np[p] = *v != 0;
  }
  return out;
}

SysfsResult<bool> set_cc_enable(const SysfsRoot& root, std::string_view netdev, cc::KnobSide side,
                                int priority, bool enabled) {
  const std::string path = enable_path(netdev, side, priority);
  if (priority < 0 || priority >= kNumPriorities) return SysfsError{path, EINVAL, "priority must be 0..7"};
  if (auto w = root.write(path, enabled ? "1" : "0"); !w) return w.error();
  auto v = root.read_u64(path);
  if (!v) return v.error();
  return (*v != 0) == enabled;
}

}  // namespace rdmad::nic_cc
