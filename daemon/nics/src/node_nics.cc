#include "rdmad/daemon/nics/node_nics.h"

#include "rdmad/metrics/exporter.h"

namespace rdmad::daemon {

NodeNics::NodeNics(const verbs::BackendRegistry& backends, const config::Config& config,
                   std::map<std::string, verbs::HostNics> discovered)
    : hardware_(backends, nic_cc::SysfsRoot(config.daemon.sysfs_root), config),
      slots_(backends),
      config_(config),
      discovered_(std::move(discovered)) {}

base::Status NodeNics::open() {
  hardware_.start(discovered_);
  discovered_.clear();
  hardware_.poll();
  if (base::Status st = slots_.open(config_); !st.ok()) return st;
  // Every port of a device shares its PCI function and NUMA node: any of them describes the slot.
  const std::vector<verbs::HostNic>& ports = hardware_.ports();
  for (const Nic& nic : slots_.nics()) {
    int found = -1;
    for (size_t p = 0; p < ports.size(); ++p)
      if (ports[p].device == nic.config.device) found = static_cast<int>(p);
    host_of_slot_.push_back(found);
  }
  return base::Status::success();
}

void NodeNics::add_metrics(metrics::Exporter& exporter) {
  collectors_ = {hardware_.collector(), slots_.collector()};
  for (const auto& c : collectors_) exporter.add_collectable(c);
  slots_.add_dcqcn_metrics(exporter.registry());
}

const verbs::HostNic* NodeNics::host_port(const std::string& device, unsigned port) const {
  for (const verbs::HostNic& p : hardware_.ports())
    if (p.device == device && p.port == port) return &p;
  return nullptr;
}

std::vector<FlowNic> NodeNics::flow_nics() const {
  std::vector<FlowNic> out;
  for (const Nic& n : slots_.nics()) {
    FlowNic fn;
    fn.name = n.config.name;
    fn.device = n.in_service() ? n.device->info().name : n.config.device;
    fn.device_ptr = n.device.get();  // nullptr while out of service
    fn.port = n.port();
    if (!n.config.advertise_address.empty()) {
      auto gid = verbs::Gid::from_ip(n.config.advertise_address);
      if (gid) fn.advertise_gid = *gid;
    }
    fn.advertise_udp_port = static_cast<uint16_t>(n.config.advertise_udp_port);
    out.push_back(std::move(fn));
  }
  return out;
}

std::vector<clients::NicDescriptor> NodeNics::nics() const {
  std::vector<clients::NicDescriptor> out;
  const std::vector<Nic>& slots = slots_.nics();
  for (size_t i = 0; i < slots.size(); ++i) {
    const Nic& nic = slots[i];
    clients::NicDescriptor d;
    d.name = nic.config.name;
    d.backend = nic.config.backend;
    // An out-of-service NIC is listed, link down (diagnose says why): indices never shift.
    if (!nic.in_service()) {
      d.link_state = RDMAD_LINK_DOWN;
    } else if (auto port = nic.device->query_port(nic.port()); port.ok()) {
      d.link_state = port.value().state == verbs::PortState::kActive ? RDMAD_LINK_UP : RDMAD_LINK_DOWN;
      d.speed_mbps = port.value().speed_mbps;
    }
    if (i < host_of_slot_.size() && host_of_slot_[i] >= 0) {
      const verbs::HostNic& hw = hardware_.ports()[static_cast<size_t>(host_of_slot_[i])];
      d.pci_address = hw.pci;
      d.numa_node = hw.numa;
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace rdmad::daemon
