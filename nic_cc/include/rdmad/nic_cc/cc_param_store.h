#pragma once
// Reading and writing the DCQCN parameters of an mlx5 port. Two places hold them on a real host:
//  - the vendor driver (MLNX_OFED): /sys/class/net/<if>/ecn/roce_rp/<knob>, .../roce_np/<knob>;
//  - the upstream kernel: debugfs /sys/kernel/debug/mlx5/<pci-bdf>/cc_params/<rp_|np_knob>, present only
//    when the firmware allows CC query and modify (drivers/infiniband/hw/mlx5/cong.c).
// Knob names, units and ranges come from cc::mlx5_knobs(); values are integers in the knob's units.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rdmad/cc/dcqcn_params.h"
#include "rdmad/nic_cc/sysfs_root.h"

namespace rdmad::nic_cc {

enum class CcParamSource : uint8_t { kVendorSysfs, kUpstreamDebugfs };

// Where the knobs of one port live.
struct CcParamLocation {
  CcParamSource source = CcParamSource::kVendorSysfs;
  std::string key;  // netdev name (vendor sysfs) or PCI address "0000:3b:00.0" (debugfs)

  static CcParamLocation vendor(std::string netdev);
  static CcParamLocation debugfs(std::string pci_address);
  // Host path of the file that holds `knob`.
  std::string knob_path(const cc::Mlx5Knob& knob) const;
  // "vendor sysfs /sys/class/net/eth0/ecn" or "debugfs /sys/kernel/debug/mlx5/0000:3b:00.0/cc_params".
  std::string describe() const;
};

// Finds the knobs of a port: the vendor tree of `netdev` if it exists, else the debugfs tree of
// `pci_address`; nullopt when neither exists (CC not manageable on this port). Either key may be empty.
std::optional<CcParamLocation> locate_cc_params(const SysfsRoot& root, std::string_view netdev,
                                                std::string_view pci_address);

struct KnobReading {
  const cc::Mlx5Knob* knob = nullptr;
  std::optional<int64_t> value;  // in the knob's units
  std::string error;             // why value is empty
};

struct CcParamsReadout {
  cc::DcqcnParams params;          // `base` with every readable knob applied
  std::vector<KnobReading> knobs;  // one per knob of cc::mlx5_knobs(), same order
  // Names of the knobs that could not be read (missing on this driver or unreadable).
  std::vector<std::string> unreadable() const;
  size_t readable_count() const;
};

// Reads every knob. Knobs that cannot be read leave the `base` value (the firmware defaults unless
// told otherwise) in `params` and are listed in `unreadable()`.
CcParamsReadout read_cc_params(const SysfsRoot& root, const CcParamLocation& where,
                               const cc::DcqcnParams& base = cc::mlx5_profile());

enum class KnobOutcome : uint8_t {
  kUnchanged,    // already had the wanted value; nothing written
  kApplied,      // written and read back equal
  kNotTaken,     // written, but the device reads back another value
  kOutOfRange,   // wanted value outside the knob's documented range; not written
  kWriteFailed,  // the write itself failed (errno in `error`)
  kUnreadable,   // the knob could not be read before or after writing
};
std::string_view to_string(KnobOutcome o);

struct KnobChange {
  const cc::Mlx5Knob* knob = nullptr;
  KnobOutcome outcome = KnobOutcome::kUnchanged;
  std::optional<int64_t> before;  // read before writing
  int64_t wanted = 0;
  std::optional<int64_t> after;  // read back after writing
  std::string error;
  // "rpg_time_reset: wanted 55, device reads back 64".
  std::string text() const;
};

struct CcApplyReport {
  std::vector<KnobChange> changes;  // one per knob considered
  cc::DcqcnParams effective;        // what the device holds afterwards, as far as it could be read
  // Every knob whose outcome is neither kUnchanged nor kApplied.
  std::vector<const KnobChange*> problems() const;
  // Knobs actually written and taken.
  std::vector<const KnobChange*> applied() const;
  bool ok() const { return problems().empty(); }
};

// Writes `desired` knob by knob (only those whose value differs), reads each back and reports every
// value the device did not take. `only` limits it to those knob names (vendor or debugfs spelling);
// empty means every knob.
CcApplyReport apply_cc_params(const SysfsRoot& root, const CcParamLocation& where,
                              const cc::DcqcnParams& desired, std::span<const std::string> only = {});

}  // namespace rdmad::nic_cc
