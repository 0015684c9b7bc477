#include "rdmad/daemon/nics/nic_slots.h"

#include <fmt/format.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "port_metric_table.h"
#include "port_metrics.h"
#include "rdmad/base/log.h"
#include "rdmad/base/log_fields.h"
#include "rdmad/daemon/nics/nic_inventory.h"
#include "rdmad/metrics/family_set.h"
#include "rdmad/metrics/metric.h"

namespace rdmad::daemon {
namespace {

const char* link_layer_name(verbs::LinkLayer l) { return l == verbs::LinkLayer::kInfiniband ? "InfiniBand" : "Ethernet"; }

// sysfs `state` numbering (and node_exporter's state_id): 1 DOWN, 2 INIT, 4 ACTIVE.
int state_id(verbs::PortState s) {
  switch (s) {
    case verbs::PortState::kDown: return 1;
    case verbs::PortState::kInit: return 2;
    case verbs::PortState::kActive: return 4;
  }
  return 0;
}

const char* state_name(verbs::PortState s) {
  switch (s) {
    case verbs::PortState::kDown: return "DOWN";
    case verbs::PortState::kInit: return "INIT";
    case verbs::PortState::kActive: return "ACTIVE";
  }
  return "?";
}

class NicCollector final : public prometheus::Collectable {
 public:
  explicit NicCollector(const std::vector<Nic>& nics) : nics_(nics) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    metrics::FamilySet f;
    for (const Nic& nic : nics_) {
      // Kernel ports are exported from sysfs by HardwareNics (the kernel's counters are the truth);
      // only such NICs can be out of service.
      if (nic.backend == nullptr || nic.backend->caps.sysfs_ports || !nic.in_service()) continue;
      const std::string device = nic.device->info().name;
      for (uint8_t p = 1; p <= nic.device->info().port_count; ++p) {
        const auto port_result = nic.device->query_port(p);
        if (port_result.ok()) {
          const verbs::PortInfo& port = port_result.value();
          add_port_info(f, {device, std::to_string(p), nic.config.backend, link_layer_name(port.link_layer),
                            nic.config.name, state_id(port.state), static_cast<double>(port.speed_mbps) * 1e6 / 8});
        }
      }
      // Counters are per device; soft NICs have one port.
      const verbs::NicCounters c = nic.device->counters();
      const metrics::LabelList l = {{"device", device}, {"port", "1"}};
      auto counter = [&](const metrics::Metric& m, uint64_t v) { f.add(m, l, static_cast<double>(v)); };
      add_port_counters(f, l,
                        {c.rx_bytes, c.tx_bytes, c.rx_packets, c.tx_packets, c.np_cnp_sent,
                         c.np_ecn_marked_roce_packets, c.rp_cnp_handled, c.rp_cnp_ignored, c.out_of_sequence,
                         c.packet_seq_err, c.local_ack_timeout_err});
      counter(port_metric::kRetransmitted, c.retransmitted_packets);
      counter(port_metric::kDuplicateRequests, c.duplicate_request);
      counter(port_metric::kRnrNakReceived, c.rnr_nak_retry_err);
      counter(port_metric::kRemoteAccessErrors, c.resp_remote_access_errors);
      counter(port_metric::kRxDropped, c.rx_dropped);
      add_rx_drops(f, l, c.rx_dropped_by_reason);
      f.add(port_metric::kDatapathCpu, l, static_cast<double>(c.datapath_cpu_ns) / 1e9);
      counter(port_metric::kDatapathSleeps, c.datapath_sleeps);
    }
    return f.take();
  }

 private:
  const std::vector<Nic>& nics_;
};

}  // namespace

void NicSlots::log_ports(const Nic& nic) const {
  auto log = log::get(log::Component::kVerbs);
  const config::NicSection& n = nic.config;
  for (uint8_t p = 1; p <= nic.device->info().port_count; ++p) {
    const auto port_result = nic.device->query_port(p);
    if (!port_result.ok()) {
      log->warn("cannot query port nic={} port={} error={}", n.name, p, base::q(port_result.status().message()));
      continue;
    }
    const verbs::PortInfo* port = &port_result.value();
    log->info("nic port nic={} backend={} device={} port={} link_layer={} state={} speed_mbps={} mtu={} gid={} udp_port={}",
              n.name, n.backend, nic.device->info().name, p, link_layer_name(port->link_layer),
              state_name(port->state), port->speed_mbps, port->active_mtu_bytes, port->gid.to_ip_string(),
              port->udp_port);
  }
}

void NicSlots::failed(Nic& nic, const std::string& why, Clock::time_point now) {
  ++nic.failed_opens;
  // The first retry at the next poll, then 1 s doubling to 60 s: a driver that is loading comes
  // in quickly, a device that is gone costs one open a minute.
  nic.retry_backoff = nic.failed_opens == 1 ? std::chrono::milliseconds(0)
                      : nic.retry_backoff.count() == 0
                          ? kRetryBackoffMin
                          : std::min(kRetryBackoffMax, nic.retry_backoff * 2);
  nic.next_retry = now + nic.retry_backoff;
  const bool changed = nic.out_of_service != why;
  nic.out_of_service = why;
  auto log = log::get(log::Component::kVerbs);
  // Logged when it starts and when the reason changes, not at every retry.
  if (changed)
    log->warn("nic out of service nic={} device={} error={} retry=backoff", nic.config.name, nic.config.device,
              base::q(why));
}

base::Status NicSlots::open(const config::Config& config) {
  auto log = log::get(log::Component::kVerbs);
  const auto now = Clock::now();
  for (const config::NicSection& n : config.nics) {
    Nic nic;
    nic.config = n;
    nic.backend = registry_.find(n.backend);
    nic.device_config = device_config_for(n, config, nic.backend);
    auto device = registry_.open(n.backend, nic.device_config);
    if (!device.ok() && nic.backend != nullptr && nic.backend->caps.retries_failed_open) {
      // A hardware NIC can be absent or not yet usable (driver loading, no provider): its CC
      // management and counters still work through sysfs; its datapath waits for retry().
      failed(nic, device.status().message(), now);
      nics_.push_back(std::move(nic));
      continue;
    }
    if (!device.ok()) {
      return base::Status::error(
          fmt::format("nic {}: cannot open with backend {}: {}", n.name, n.backend, device.status().message()));
    }
    nic.device = std::move(device.value());
    log_ports(nic);
    nics_.push_back(std::move(nic));
  }
  if (nics_.empty()) log->info("no nics configured");
  return base::Status::success();
}

const Nic* NicSlots::find(const std::string& name) const {
  for (const Nic& nic : nics_)
    if (nic.config.name == name) return &nic;
  return nullptr;
}

std::vector<size_t> NicSlots::retry(Clock::time_point now) {
  std::vector<size_t> opened;
  for (size_t i = 0; i < nics_.size(); ++i) {
    Nic& nic = nics_[i];
    if (nic.in_service() || now < nic.next_retry) continue;
    auto device = registry_.open(nic.config.backend, nic.device_config);
    if (!device.ok()) {
      failed(nic, device.status().message(), now);
      continue;
    }
    log::get(log::Component::kVerbs)->info("nic in service nic={} device={} failed_opens={}", nic.config.name,
                            nic.config.device, nic.failed_opens);
    nic.device = std::move(device.value());
    nic.out_of_service.clear();
    nic.failed_opens = 0;
    nic.retry_backoff = std::chrono::milliseconds(0);
    log_ports(nic);
    opened.push_back(i);
  }
  return opened;
}

std::string NicSlots::diagnosis() const {
  std::string out;
  for (const Nic& nic : nics_) {
    if (nic.in_service()) continue;
    out += fmt::format("warn nic {}: out of service (device {}): {}\n", nic.config.name, nic.config.device,
                       nic.out_of_service);
  }
  return out;
}

std::shared_ptr<prometheus::Collectable> NicSlots::collector() const {
  return std::make_shared<NicCollector>(nics_);
}

std::vector<double> dcqcn_rate_buckets_bits_per_second() {
  return {10e6, 100e6, 1e9, 10e9, 25e9, 50e9, 100e9, 200e9, 400e9};
}

void NicSlots::add_dcqcn_metrics(prometheus::Registry& registry) {
  auto& rate = metrics::build_histogram(port_metric::kDcqcnRate, registry);
  auto& rate_mbps = metrics::build_histogram(port_metric::kDcqcnRateMbpsDeprecated, registry);
  auto& alpha = metrics::build_histogram(port_metric::kDcqcnAlpha, registry);
  const prometheus::Histogram::BucketBoundaries rate_buckets = dcqcn_rate_buckets_bits_per_second();
  prometheus::Histogram::BucketBoundaries mbps_buckets;
  for (double b : rate_buckets) mbps_buckets.push_back(b / 1e6);
  const prometheus::Histogram::BucketBoundaries alpha_buckets{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 1};
  for (const Nic& nic : nics_) {
    // Only a DCQCN that runs in the backend has a state to sample; such NICs have one port.
    if (nic.backend == nullptr || !nic.backend->caps.software_cc || !nic.in_service()) continue;
    const prometheus::Labels labels{{"device", nic.device->info().name}, {"port", "1"}};
    dcqcn_.push_back({nic.device.get(), &rate.Add(labels, rate_buckets), &rate_mbps.Add(labels, mbps_buckets),
                      &alpha.Add(labels, alpha_buckets)});
  }
}

void NicSlots::sample_dcqcn() {
  for (const DcqcnHistograms& h : dcqcn_) {
    for (const verbs::DcqcnSample& s : h.device->dcqcn_samples()) {
      h.rate->Observe(s.rate_mbps * 1e6);
      h.rate_mbps->Observe(s.rate_mbps);
      h.alpha->Observe(s.alpha);
    }
  }
}

}  // namespace rdmad::daemon
