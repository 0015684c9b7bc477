#pragma once
// Everything nic_cc knows about one port's congestion control, gathered in one call for the daemon's
// start-up log and periodic checks.
#include <optional>
#include <string>
#include <string_view>

#include "rdmad/nic_cc/cc_enable.h"
#include "rdmad/nic_cc/cc_param_store.h"

namespace rdmad::nic_cc {

struct CcPortStatus {
  std::optional<CcParamLocation> location;  // nullopt: CC parameters are not reachable on this port
  std::optional<CcParamsReadout> readout;   // present when location is
  std::optional<CcPriorityEnable> enable;   // vendor driver only
  // "DCQCN via debugfs /sys/kernel/debug/mlx5/0000:3b:00.0/cc_params: g=... (19/19 knobs)" or why none.
  std::string summary() const;
};

// Locates, reads the parameters and (vendor driver) the per-priority switches of a port, given its
// netdev and PCI address (either may be empty).
CcPortStatus inspect_cc(const SysfsRoot& root, std::string_view netdev, std::string_view pci_address);

}  // namespace rdmad::nic_cc
