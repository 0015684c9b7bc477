#pragma once
// The node's hardware RDMA ports as the kernel shows them: discovery (BackendInfo::discover of every
// backend whose ports are kernel ports, sysfs_ports: libibverbs + sysfs for rdma_core), the NIC's
// DCQCN parameters (read, and written where [[nic]] cc_apply says so), port and driver counters for
// metrics, and congestion-control health checks (CNPs ignored, CC disabled on the RoCE priority).
// All sysfs/debugfs access goes through one root (daemon.sysfs_root), so tests use fixture trees.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include <prometheus/collectable.h>

#include "rdmad/config/config.h"
#include "rdmad/nic_cc/port_counters.h"
#include "rdmad/nic_cc/sysfs_root.h"
#include "rdmad/verbs/host_nic.h"
#include "rdmad/verbs/registry.h"

namespace rdmad::daemon {

class HardwareNics {
 public:
  // `backends` outlives this object.
  HardwareNics(const verbs::BackendRegistry& backends, nic_cc::SysfsRoot root, const config::Config& config);

  // Finds the ports: every device the sysfs_ports backends list, plus each [[nic]] device of such a
  // backend that sysfs shows. Logs one line per port, the CC parameters found and any it changed
  // (cc_apply). `discovered`: discoveries already made at start-up, by backend name (the embedded
  // default's), used instead of scanning again.
  void start(const std::map<std::string, verbs::HostNics>& discovered = {});
  // Samples driver counters and checks CC health; logs a finding when it appears and when it clears.
  void poll();
  /// Every port found by start(), device by device.
  const std::vector<verbs::HostNic>& ports() const { return host_ports_; }
  /// The ports of every device found by start(), read from sysfs now with their GID tables
  /// (rdmactl gids): GIDs follow the host's addresses.
  std::vector<verbs::HostNic> gid_tables() const;
  // Port state, speed, counters, DCQCN counters and CC health, read when Prometheus scrapes.
  std::shared_ptr<prometheus::Collectable> collector() const;

  // Records the DCQCN parameters now in force on a port after they were changed at run time
  // (rdmactl cc set), for rdmad_cc_params_info.
  void note_cc_params(const std::string& device, unsigned port, const cc::DcqcnParams& in_force);

  // The congestion-control checks as diagnose lines ("<ok|fail|info> cc <device>/<port>: ..."),
  // one per hardware port: where its DCQCN lives and each active finding.
  std::string cc_diagnosis() const;

  // Active findings as "device/port/reason" keys (for tests and rdmactl).
  std::vector<std::string> findings_for_test() const;

 private:
  struct PortKey {
    std::string device;
    unsigned port;
    auto operator<=>(const PortKey&) const = default;
  };
  struct PortState {
    std::string netdev;
    std::string nic_name;  // [[nic]] name, empty for a port no [[nic]] names
    int roce_priority = 3;
    std::optional<nic_cc::HwCounters> last;
    std::map<std::string, std::string> findings;  // reason -> text
    std::map<std::string, std::string> cc_info;    // knob -> value, for rdmad_cc_params_info
  };
  class Collector;

  const config::NicSection* configured(const std::string& device) const;
  void discover(const verbs::BackendInfo& b, const verbs::HostNics* known);
  void inspect_and_apply(const verbs::HostNic& p, PortState& st);

  nic_cc::SysfsRoot root_;
  config::Config config_;
  const verbs::BackendRegistry& backends_;
  std::vector<verbs::HostNic> host_ports_;
  std::map<std::string, const verbs::BackendInfo*> backend_of_;  // device -> the backend that found it
  mutable std::mutex mu_;  // guards ports_ (poll on the control thread, scrapes on the HTTP thread)
  std::map<PortKey, PortState> ports_;
};

}  // namespace rdmad::daemon
