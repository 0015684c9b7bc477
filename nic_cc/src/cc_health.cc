#include "rdmad/nic_cc/cc_health.h"

#include <fmt/format.h>

namespace rdmad::nic_cc {

namespace {

void check_enable(const CcHealthInput& in, std::vector<CcFinding>& out) {
  if (!in.enable || in.roce_priority < 0 || in.roce_priority >= kNumPriorities) return;
  const auto prio = static_cast<size_t>(in.roce_priority);
  if (in.enable->rp[prio] == false) {
    out.push_back(
        {CcFindingKind::kRpDisabledOnRocePrio,
         fmt::format("{} port {}: DCQCN reaction point is disabled on priority {} which carries RoCE "
                     "traffic; CNPs will be ignored and senders will not slow down",
                     in.device, in.port, prio)});
  }
  if (in.enable->np[prio] == false) {
    out.push_back(
        {CcFindingKind::kNpDisabledOnRocePrio,
         fmt::format("{} port {}: DCQCN notification point is disabled on priority {} which carries "
                     "RoCE traffic; ECN marks will not produce CNPs",
                     in.device, in.port, prio)});
  }
}

void check_cnp_ignored(const CcHealthInput& in, std::vector<CcFinding>& out) {
  if (in.previous == nullptr || in.current == nullptr) return;
  const auto before = in.previous->get("rp_cnp_ignored");
  const auto now = in.current->get("rp_cnp_ignored");
  if (!before || !now) return;
  if (*now < *before) {
    out.push_back({CcFindingKind::kCounterWentBackwards,
                   fmt::format("{} port {}: rp_cnp_ignored went from {} to {}; counters were reset",
                               in.device, in.port, *before, *now)});
  } else if (*now > *before) {
    out.push_back(
        {CcFindingKind::kCnpIgnoredRising,
         fmt::format("{} port {}: rp_cnp_ignored rose by {} (to {}): CNPs arrive for a priority whose "
                     "DCQCN reaction point is disabled",
                     in.device, in.port, *now - *before, *now)});
  }
}

}  // namespace

std::vector<CcFinding> check_cc_health(const CcHealthInput& in) {
  std::vector<CcFinding> out;
  check_enable(in, out);
  check_cnp_ignored(in, out);
  return out;
}

}  // namespace rdmad::nic_cc
