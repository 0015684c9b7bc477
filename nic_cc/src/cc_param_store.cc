#include "rdmad/nic_cc/cc_param_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace rdmad::nic_cc {

namespace {

std::string vendor_base(std::string_view netdev) { return fmt::format("/sys/class/net/{}/ecn", netdev); }
std::string debugfs_base(std::string_view pci) {
  return fmt::format("/sys/kernel/debug/mlx5/{}/cc_params", pci);
}

SysfsResult<int64_t> read_knob(const SysfsRoot& root, const CcParamLocation& where, const cc::Mlx5Knob& k) {
  auto v = root.read_u64(where.knob_path(k));
  if (!v) return v.error();
  if (*v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return SysfsError{where.knob_path(k), ERANGE, {}};
  }
  return static_cast<int64_t>(*v);
}

bool selected(const cc::Mlx5Knob& k, std::span<const std::string> only) {
  if (only.empty()) return true;
  return std::any_of(only.begin(), only.end(),
                     [&](const std::string& n) { return n == k.name || n == k.debugfs_name; });
}

}  // namespace

CcParamLocation CcParamLocation::vendor(std::string netdev) {
  return {CcParamSource::kVendorSysfs, std::move(netdev)};
}

CcParamLocation CcParamLocation::debugfs(std::string pci_address) {
  return {CcParamSource::kUpstreamDebugfs, std::move(pci_address)};
}

std::string CcParamLocation::knob_path(const cc::Mlx5Knob& knob) const {
  if (source == CcParamSource::kUpstreamDebugfs)
    return fmt::format("{}/{}", debugfs_base(key), knob.debugfs_name);
  const char* side = knob.side == cc::KnobSide::kReactionPoint ? "roce_rp" : "roce_np";
  return fmt::format("{}/{}/{}", vendor_base(key), side, knob.name);
}

std::string CcParamLocation::describe() const {
  if (source == CcParamSource::kUpstreamDebugfs) return "debugfs " + debugfs_base(key);
  return "vendor sysfs " + vendor_base(key);
}

std::optional<CcParamLocation> locate_cc_params(const SysfsRoot& root, std::string_view netdev,
                                                std::string_view pci_address) {
  if (!netdev.empty() && root.exists(vendor_base(netdev) + "/roce_rp")) {
    return CcParamLocation::vendor(std::string(netdev));
  }
  if (!pci_address.empty() && root.exists(debugfs_base(pci_address))) {
    return CcParamLocation::debugfs(std::string(pci_address));
  }
  return std::nullopt;
}

std::vector<std::string> CcParamsReadout::unreadable() const {
  std::vector<std::string> names;
  for (const auto& k : knobs) {
    if (!k.value) names.emplace_back(k.knob->name);
  }
  return names;
}

size_t CcParamsReadout::readable_count() const {
  return static_cast<size_t>(
      std::count_if(knobs.begin(), knobs.end(), [](const auto& k) { return k.value.has_value(); }));
}

CcParamsReadout read_cc_params(const SysfsRoot& root, const CcParamLocation& where,
                               const cc::DcqcnParams& base) {
  CcParamsReadout out;
  out.params = base;
  for (const auto& knob : cc::mlx5_knobs()) {
    KnobReading r{&knob, std::nullopt, {}};
    if (auto v = read_knob(root, where, knob)) {
      r.value = *v;
      knob.set(out.params, *v);
    } else {
      r.error = v.error().message();
    }
    out.knobs.push_back(std::move(r));
  }
  return out;
}

std::string_view to_string(KnobOutcome o) {
  switch (o) {
    case KnobOutcome::kUnchanged:
      return "unchanged";
    case KnobOutcome::kApplied:
      return "applied";
    case KnobOutcome::kNotTaken:
      return "not taken";
    case KnobOutcome::kOutOfRange:
      return "out of range";
    case KnobOutcome::kWriteFailed:
      return "write failed";
    case KnobOutcome::kUnreadable:
      return "unreadable";
  }
  return "?";
}

std::string KnobChange::text() const {
  const std::string_view name = knob != nullptr ? knob->name : "?";
  switch (outcome) {
    case KnobOutcome::kUnchanged:
      return fmt::format("{}: already {}", name, wanted);
    case KnobOutcome::kApplied:
      return fmt::format("{}: {} -> {}", name, before.value_or(-1), wanted);
    case KnobOutcome::kNotTaken:
      return fmt::format("{}: wanted {}, device reads back {}", name, wanted, after.value_or(-1));
    case KnobOutcome::kOutOfRange:
      return fmt::format("{}: wanted {} is outside [{}, {}]; not written", name, wanted, knob->min,
                         knob->max);
    case KnobOutcome::kWriteFailed:
      return fmt::format("{}: writing {} failed: {}", name, wanted, error);
    case KnobOutcome::kUnreadable:
      return fmt::format("{}: cannot read: {}", name, error);
  }
  return std::string(name);
}

std::vector<const KnobChange*> CcApplyReport::problems() const {
  std::vector<const KnobChange*> out;
  for (const auto& c : changes) {
    if (c.outcome != KnobOutcome::kUnchanged && c.outcome != KnobOutcome::kApplied) out.push_back(&c);
  }
  return out;
}

std::vector<const KnobChange*> CcApplyReport::applied() const {
  std::vector<const KnobChange*> out;
  for (const auto& c : changes) {
    if (c.outcome == KnobOutcome::kApplied) out.push_back(&c);
  }
  return out;
}

CcApplyReport apply_cc_params(const SysfsRoot& root, const CcParamLocation& where,
                              const cc::DcqcnParams& desired, std::span<const std::string> only) {
  CcApplyReport report;
  for (const auto& knob : cc::mlx5_knobs()) {
    if (!selected(knob, only)) continue;
    KnobChange c;
    c.knob = &knob;
    c.wanted = knob.get(desired);
    auto before = read_knob(root, where, knob);
    if (!before) {
      c.outcome = KnobOutcome::kUnreadable;
      c.error = before.error().message();
      report.changes.push_back(std::move(c));
      continue;
    }
    c.before = *before;
    if (c.wanted < knob.min || c.wanted > knob.max) {
      c.outcome = KnobOutcome::kOutOfRange;
    } else if (*before == c.wanted) {
      c.outcome = KnobOutcome::kUnchanged;
      c.after = *before;
    } else if (auto w = root.write(where.knob_path(knob), std::to_string(c.wanted)); !w) {
      c.outcome = KnobOutcome::kWriteFailed;
      c.error = w.error().message();
    } else if (auto after = read_knob(root, where, knob); !after) {
      c.outcome = KnobOutcome::kUnreadable;
      c.error = after.error().message();
    } else {
      // Firmware may quantize or clamp silently; only the read-back tells.
      c.after = *after;
      c.outcome = *after == c.wanted ? KnobOutcome::kApplied : KnobOutcome::kNotTaken;
    }
    report.changes.push_back(std::move(c));
  }
  report.effective = read_cc_params(root, where).params;
  return report;
}

}  // namespace rdmad::nic_cc
