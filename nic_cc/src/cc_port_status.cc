#include "rdmad/nic_cc/cc_port_status.h"

#include <fmt/format.h>

namespace rdmad::nic_cc {

std::string CcPortStatus::summary() const {
  if (!location || !readout) {
    return "DCQCN parameters not reachable (no vendor ecn/ tree, no readable debugfs cc_params)";
  }
  std::string s =
      fmt::format("DCQCN via {}: {} ({}/{} knobs)", location->describe(), cc::describe(readout->params),
                  readout->readable_count(), readout->knobs.size());
  if (enable) {
    std::string rp, np;
    for (int p = 0; p < kNumPriorities; ++p) {
      const auto i = static_cast<size_t>(p);
      rp += enable->rp[i] ? (*enable->rp[i] ? '1' : '0') : '?';
      np += enable->np[i] ? (*enable->np[i] ? '1' : '0') : '?';
    }
    s += fmt::format(" enable rp={} np={} (priorities 0..7)", rp, np);
  }
  return s;
}

CcPortStatus inspect_cc(const SysfsRoot& root, std::string_view netdev, std::string_view pci_address) {
  CcPortStatus st;
  st.location = locate_cc_params(root, netdev, pci_address);
  if (!st.location) return st;
  st.readout = read_cc_params(root, *st.location);
  if (st.location->source == CcParamSource::kVendorSysfs) {
    if (auto e = read_cc_enable(root, st.location->key)) st.enable = *e;
  }
  return st;
}

}  // namespace rdmad::nic_cc
