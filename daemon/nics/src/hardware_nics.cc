#include "rdmad/daemon/nics/hardware_nics.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "port_metric_table.h"
#include "port_metrics.h"
#include "rdmad/base/log_fields.h"
#include "rdmad/base/log.h"
#include "rdmad/metrics/family_set.h"
#include "rdmad/nic_cc/cc_enable.h"
#include "rdmad/nic_cc/cc_health.h"
#include "rdmad/nic_cc/cc_param_store.h"
#include "rdmad/nic_cc/cc_port_status.h"

namespace rdmad::daemon {

namespace {

const char* reason_of(nic_cc::CcFindingKind k) {
  switch (k) {
    case nic_cc::CcFindingKind::kCnpIgnoredRising: return "cnp_ignored";
    case nic_cc::CcFindingKind::kRpDisabledOnRocePrio: return "cc_disabled_on_priority";
    case nic_cc::CcFindingKind::kNpDisabledOnRocePrio: return "np_disabled_on_priority";
    case nic_cc::CcFindingKind::kCounterWentBackwards: return "counters_reset";
  }
  return "unknown";
}

}  // namespace

HardwareNics::HardwareNics(const verbs::BackendRegistry& backends, nic_cc::SysfsRoot root,
                           const config::Config& config)
    : root_(std::move(root)), config_(config), backends_(backends) {}

const config::NicSection* HardwareNics::configured(const std::string& device) const {
  for (const auto& n : config_.nics) {
    const verbs::BackendInfo* b = backends_.find(n.backend);
    if (b != nullptr && b->caps.sysfs_ports && n.device == device) return &n;
  }
  return nullptr;
}

void HardwareNics::discover(const verbs::BackendInfo& b, const verbs::HostNics* known) {
  auto log = log::get(log::Component::kVerbs);
  verbs::HostScan scan;
  scan.sysfs_root = root_.root().string();
  for (const auto& n : config_.nics)
    if (n.backend == b.name) scan.devices.push_back(n.device);
  auto found = known != nullptr ? verbs::Result<verbs::HostNics>(*known) : b.discover(scan);
  if (!found.ok()) {
    log->error("rdma device discovery failed error={}", base::q(found.status().message()));
    // The configured devices are still manageable through sysfs.
    scan.sysfs_only = true;
    found = b.discover(scan);
    if (!found.ok()) return;
  }
  for (const auto& w : found.value().warnings) log->warn("rdma device discovery warning detail={}", base::q(w));
  const verbs::HostNics& host = found.value();
  for (const auto& n : config_.nics) {
    if (n.backend != b.name) continue;
    if (std::find(host.devices.begin(), host.devices.end(), n.device) != host.devices.end()) continue;
    log->error("rdma device not found nic={} device={} searched=libibverbs,/sys/class/infiniband", n.name,
               n.device);
  }
  for (const std::string& d : host.devices) backend_of_.emplace(d, &b);
  for (const std::string& line : host.notes) log->info("rdma device note detail={}", base::q(line));
  host_ports_.insert(host_ports_.end(), host.ports.begin(), host.ports.end());
}

std::vector<verbs::HostNic> HardwareNics::gid_tables() const {
  std::vector<verbs::HostNic> out;
  for (const auto& [device, backend] : backend_of_) {
    verbs::HostScan scan{root_.root().string(), {device}, true};
    scan.gids = true;
    auto found = backend->discover(scan);
    if (found.ok()) out.insert(out.end(), found.value().ports.begin(), found.value().ports.end());
  }
  return out;
}

void HardwareNics::start(const std::map<std::string, verbs::HostNics>& discovered) {
  auto log = log::get(log::Component::kVerbs);
  for (const std::string& name : backends_.names()) {
    const verbs::BackendInfo* b = backends_.find(name);
    const auto known = discovered.find(name);
    if (b->caps.sysfs_ports && b->discover) discover(*b, known != discovered.end() ? &known->second : nullptr);
  }
  if (backend_of_.empty()) {
    log->info("no rdma devices found hardware_management=idle");
    return;
  }
  std::lock_guard lock(mu_);
  for (const verbs::HostNic& p : host_ports_) {
    log->info("rdma port found device={} port={} detail={}", p.device, p.port, base::q(p.summary));
    PortState& st = ports_[PortKey{p.device, p.port}];
    st.netdev = p.netdev;
    if (const auto* n = configured(p.device)) {
      st.nic_name = n->name;
      st.roce_priority = static_cast<int>(n->roce_priority);
    }
    inspect_and_apply(p, st);
  }
}

void HardwareNics::inspect_and_apply(const verbs::HostNic& p, PortState& st) {
  auto log = log::get(log::Component::kCc);
  const auto status = nic_cc::inspect_cc(root_, p.netdev, p.pci);
  log->info("cc status device={} port={} summary={}", p.device, p.port, base::q(status.summary()));
  if (!status.location) return;
  const config::NicSection* n = configured(p.device);
  cc::DcqcnParams in_force = status.readout->params;
  if (n != nullptr && n->cc_apply) {
    const auto report = nic_cc::apply_cc_params(root_, *status.location, config_.cc.params);
    for (const auto* c : report.applied())
      log->info("cc knob set device={} port={} change={}", p.device, p.port, base::q(c->text()));
    for (const auto* c : report.problems())
      log->warn("cc knob not set device={} port={} problem={}", p.device, p.port, base::q(c->text()));
    log->info("cc profile applied device={} port={} profile={} changed={} not_taken={}", p.device, p.port,
              base::q(config_.cc.source()), report.applied().size(), report.problems().size());
    in_force = report.effective;
  }
  st.cc_info["source"] = status.location->describe();
  for (const auto& k : cc::mlx5_knobs()) st.cc_info[std::string(k.name)] = std::to_string(k.get(in_force));
}

void HardwareNics::note_cc_params(const std::string& device, unsigned port, const cc::DcqcnParams& in_force) {
  std::lock_guard lock(mu_);
  auto it = ports_.find(PortKey{device, port});
  if (it == ports_.end() || it->second.cc_info.empty()) return;
  for (const auto& k : cc::mlx5_knobs()) it->second.cc_info[std::string(k.name)] = std::to_string(k.get(in_force));
}

void HardwareNics::poll() {
  auto log = log::get(log::Component::kCc);
  std::lock_guard lock(mu_);
  for (auto& [key, st] : ports_) {
    auto hw = nic_cc::read_hw_counters(root_, key.device, key.port);
    if (!hw.ok()) continue;  // not every driver has hw_counters
    nic_cc::CcHealthInput in;
    in.device = key.device;
    in.port = key.port;
    in.roce_priority = st.roce_priority;
    in.previous = st.last ? &*st.last : nullptr;
    in.current = &hw.value();
    if (!st.netdev.empty()) {
      if (auto en = nic_cc::read_cc_enable(root_, st.netdev); en.ok()) in.enable = en.value();
    }
    std::map<std::string, std::string> now;
    for (const auto& f : nic_cc::check_cc_health(in)) now[reason_of(f.kind)] = f.text;
    for (const auto& [reason, text] : now)
      if (!st.findings.count(reason))
        log->warn("cc misconfiguration device={} port={} reason={} detail={}", key.device, key.port, reason,
                  base::q(text));
    for (const auto& [reason, text] : st.findings)
      if (!now.count(reason))
        log->info("cc misconfiguration resolved device={} port={} reason={}", key.device, key.port, reason);
    st.findings = std::move(now);
    st.last = std::move(hw.value());
  }
}

std::string HardwareNics::cc_diagnosis() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [key, st] : ports_) {
    const auto source = st.cc_info.find("source");
    const std::string where = source != st.cc_info.end() ? "DCQCN via " + source->second : "no DCQCN parameters found";
    if (st.findings.empty()) {
      out += fmt::format("{} cc {}/{}: {}; no misconfiguration found\n",
                         source != st.cc_info.end() ? "ok" : "warn", key.device, key.port, where);
      continue;
    }
    for (const auto& [reason, text] : st.findings)
      out += fmt::format("fail cc {}/{}: {} ({}; {})\n", key.device, key.port, text, reason, where);
  }
  return out;
}

std::vector<std::string> HardwareNics::findings_for_test() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [key, st] : ports_)
    for (const auto& [reason, text] : st.findings) out.push_back(fmt::format("{}/{}/{}", key.device, key.port, reason));
  return out;
}

class HardwareNics::Collector final : public prometheus::Collectable {
 public:
  explicit Collector(const HardwareNics& owner) : owner_(owner) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    metrics::FamilySet f;
    std::lock_guard lock(owner_.mu_);
    // A device's ports are consecutive in host_ports_: each device is read once.
    std::string device;
    const verbs::BackendInfo* backend = nullptr;
    verbs::Result<verbs::HostNics> fresh = verbs::HostNics{};
    for (const verbs::HostNic& p : owner_.host_ports_) {
      if (p.device != device || backend == nullptr) {
        // State and counters are read now: sysfs is the source of truth for hardware ports.
        device = p.device;
        backend = owner_.backend_of_.at(device);
        fresh = backend->discover(verbs::HostScan{owner_.root_.root().string(), {device}, true});
      }
      const std::string port = std::to_string(p.port);
      const metrics::LabelList l = {{"device", device}, {"port", port}};
      const auto it = owner_.ports_.find(PortKey{device, p.port});
      const PortState* st = it == owner_.ports_.end() ? nullptr : &it->second;
      int state = p.link.state;
      uint64_t rate = p.link.speed_mbps;
      if (fresh.ok()) {
        for (const auto& fp : fresh.value().ports)
          if (fp.port == p.port) state = fp.link.state, rate = fp.link.speed_mbps;
      }
      add_port_info(f, {device, port, backend->name, std::string(verbs::to_string(p.link.layer)),
                        st ? st->nic_name : "", state, static_cast<double>(rate) * 1e6 / 8});
      PortCounterValues v;
      if (auto pc = nic_cc::read_port_counters(owner_.root_, device, p.port); pc.ok()) {
        // counters/port_*_data count 4-byte words; read_port_counters returns bytes.
        v.rx_bytes = pc.value().rcv_bytes;
        v.tx_bytes = pc.value().xmit_bytes;
        v.rx_packets = pc.value().rcv_packets;
        v.tx_packets = pc.value().xmit_packets;
      }
      if (auto hw = nic_cc::read_hw_counters(owner_.root_, device, p.port); hw.ok()) {
        // rxe has no counters/ (no PMA): its packet counts are driver counters of its own names.
        if (!v.tx_packets) v.tx_packets = hw.value().get("sent_pkts");
        if (!v.rx_packets) v.rx_packets = hw.value().get("rcvd_pkts");
        const auto dc = nic_cc::dcqcn_counters(hw.value());
        v.np_cnp_sent = dc.np_cnp_sent;
        v.np_ecn_marked = dc.np_ecn_marked_roce_packets;
        v.rp_cnp_handled = dc.rp_cnp_handled;
        v.rp_cnp_ignored = dc.rp_cnp_ignored;
        v.out_of_sequence = dc.out_of_sequence;
        v.packet_seq_err = dc.packet_seq_err;
        v.local_ack_timeout_err = dc.local_ack_timeout_err;
        // Every driver counter as it is (rxe's and mlx5's differ; the ones above are the mlx5
        // names dashboards know).
        for (const auto& [counter, value] : hw.value().values) {
          f.add(port_metric::kHwCounter, {{"device", device}, {"port", port}, {"counter", counter}},
                static_cast<double>(value));
        }
      }
      add_port_counters(f, l, v);
      if (st != nullptr) {
        for (const char* reason : {"cnp_ignored", "cc_disabled_on_priority", "np_disabled_on_priority"}) {
          f.add(port_metric::kCcMisconfigured, {{"device", device}, {"port", port}, {"reason", reason}},
                st->findings.count(reason) ? 1 : 0);
        }
        if (!st->cc_info.empty()) {
          metrics::LabelList info = l;
          for (const auto& [knob, value] : st->cc_info) info.emplace_back(knob, value);
          f.add(port_metric::kCcParamsInfo, info, 1);
        }
      }
    }
    return f.take();
  }

 private:
  const HardwareNics& owner_;
};

std::shared_ptr<prometheus::Collectable> HardwareNics::collector() const { return std::make_shared<Collector>(*this); }

}  // namespace rdmad::daemon
