#pragma once
// The node's NICs, one owner: the [[nic]] slots (the opened devices, NicSlots), the kernel's view
// of the hardware ports (HardwareNics), their collectors, health and diagnosis. The others see
// narrow views of it: the client service the NIC list (clients::NicDirectory), the flow engine its
// FlowNics, the registrar and the event monitor the slots.
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rdmad/base/status.h"
#include "rdmad/config/config.h"
#include "rdmad/daemon/nics/flow_nic.h"
#include "rdmad/daemon/nics/hardware_nics.h"
#include "rdmad/daemon/nics/nic_directory.h"
#include "rdmad/daemon/nics/nic_slots.h"
#include "rdmad/verbs/host_nic.h"
#include "rdmad/verbs/registry.h"

namespace rdmad::metrics {
class Exporter;
}  // namespace rdmad::metrics

namespace rdmad::daemon {

class NodeNics final : public clients::NicDirectory {
 public:
  using Clock = NicSlots::Clock;

  // `backends` outlives this object.
  // `discovered`: the host scans start-up made already (EmbeddedNics::discovered), not made again.
  NodeNics(const verbs::BackendRegistry& backends, const config::Config& config,
           std::map<std::string, verbs::HostNics> discovered = {});

  /// Finds the hardware ports (HardwareNics::start and a first poll), then opens every [[nic]]
  /// (NicSlots::open). An error is a start-up error that names the NIC.
  base::Status open();
  /// Exports the hardware ports, the slots' counters and the DCQCN histograms. Call once, after
  /// open(); `exporter` scrapes them until it stops (before this object goes).
  void add_metrics(metrics::Exporter& exporter);
  /// Samples the hardware ports' counters and CC health (every nic_poll_interval_ms).
  void poll() { hardware_.poll(); }
  /// Opens the out-of-service NICs whose retry is due; the indices of those that opened.
  std::vector<size_t> retry(Clock::time_point now) { return slots_.retry(now); }
  /// Observes the software NICs' DCQCN state (every second).
  void sample_dcqcn() { slots_.sample_dcqcn(); }
  /// The diagnose lines: NICs out of service, then the CC checks of the hardware ports.
  std::string diagnosis() const { return slots_.diagnosis() + hardware_.cc_diagnosis(); }

  const NicSlots& slots() const { return slots_; }
  HardwareNics& hardware() { return hardware_; }
  /// The hardware port `port` of `device`, as the kernel shows it; nullptr when it has none.
  const verbs::HostNic* host_port(const std::string& device, unsigned port) const;
  /// Every [[nic]] as the flow engine sees it, in slot order (out-of-service NICs with no device).
  std::vector<FlowNic> flow_nics() const;

  // clients::NicDirectory: every slot in order, an out-of-service one link down; PCI address and NUMA
  // node from the hardware port of its device.
  std::vector<clients::NicDescriptor> nics() const override;
  size_t count() const override { return slots_.nics().size(); }

 private:
  HardwareNics hardware_;
  NicSlots slots_;
  config::Config config_;
  std::map<std::string, verbs::HostNics> discovered_;  // until open()
  // By slot: the index in hardware_.ports() of a port of its device (-1: none), joined once at open().
  std::vector<int> host_of_slot_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectors_;
};

}  // namespace rdmad::daemon
