#include "large_node.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "rdmad/metrics/family_set.h"

namespace rdmad::bench {
namespace {

// mlx5 hw_counters and port counters, as a hardware NIC exports them per port.
constexpr const char* kPortCounters[] = {"rx_write_requests",
                                         "rx_read_requests",
                                         "rx_atomic_requests",
                                         "out_of_buffer",
                                         "out_of_sequence",
                                         "duplicate_request",
                                         "rnr_nak_retry_err",
                                         "packet_seq_err",
                                         "implied_nak_seq_err",
                                         "local_ack_timeout_err",
                                         "resp_local_length_error",
                                         "resp_cqe_error",
                                         "req_cqe_error",
                                         "req_remote_invalid_request",
                                         "req_remote_access_errors",
                                         "resp_remote_access_errors",
                                         "resp_cqe_flush_error",
                                         "req_cqe_flush_error",
                                         "roce_adp_retrans",
                                         "roce_adp_retrans_to",
                                         "roce_slow_restart",
                                         "roce_slow_restart_cnps",
                                         "roce_slow_restart_trans",
                                         "rp_cnp_ignored",
                                         "rp_cnp_handled",
                                         "np_ecn_marked_roce_packets",
                                         "np_cnp_sent",
                                         "rx_icrc_encapsulated",
                                         "port_rcv_data",
                                         "port_xmit_data"};
constexpr const char* kPortGauges[] = {
    "link_width", "link_speed_gbps", "phys_state", "state", "lid",
    "sm_lid",     "mtu_bytes",       "gids",       "pkeys", "temperature_celsius"};
constexpr const char* kHistograms[] = {"rdmad_completion_latency_seconds", "rdmad_cnp_interval_seconds",
                                       "rdmad_qp_setup_seconds", "rdmad_rate_update_interval_seconds"};
constexpr int kBuckets = 20;

// Deterministic, realistically large values (byte counters near 1e13 serialise like real ones).
uint64_t next(uint64_t& s) {
  s = s * 6364136223846793005ULL + 1442695040888963407ULL;
  return s >> 20;
}

std::string device_name(int nic) { return "mlx5_" + std::to_string(nic); }

// Live state the datapath would keep: plain counters, read at scrape time.
struct NodeState {
  struct Flow {
    uint64_t rate_mbps, target_mbps, cnps, bytes;
  };
  struct Nic {
    std::array<std::array<uint64_t, kBuckets>, 4> buckets;
    std::vector<std::array<uint64_t, 6>> priorities;
    std::vector<Flow> flows;
    std::array<uint64_t, 10> balancer;
    std::array<uint64_t, 16> port;
  };
  struct Uid {
    uint32_t uid;
    uint64_t regions_host, regions_gpu, bytes_host, bytes_gpu, requests, clients;
    double quota_ratio;
  };
  std::vector<Nic> nics;
  std::vector<Uid> uids;
};

class NodeCollector : public prometheus::Collectable {
 public:
  explicit NodeCollector(const NodeShape& shape) : shape_(shape) {
    uint64_t s = 42;
    state_.nics.resize(static_cast<size_t>(shape.nics));
    for (auto& nic : state_.nics) {
      for (auto& h : nic.buckets) {
        uint64_t cum = 0;
        for (auto& b : h) b = cum += next(s) % 100000;
      }
      nic.priorities.resize(static_cast<size_t>(shape.priorities));
      for (auto& p : nic.priorities)
        for (auto& v : p) v = next(s);
      nic.flows.resize(static_cast<size_t>(shape.flows_per_nic));
      for (auto& f : nic.flows) f = {next(s) % 400000, next(s) % 400000, next(s) % 1000000, next(s)};
      for (auto& v : nic.balancer) v = next(s) % 1000;
      for (auto& v : nic.port) v = next(s);
    }
    for (int u = 0; u < shape.uids; ++u)
      state_.uids.push_back({static_cast<uint32_t>(1000 + u), next(s) % 5000, next(s) % 5000, next(s),
                             next(s), next(s) % 100000000, next(s) % 64,
                             static_cast<double>(next(s) % 1000) / 1000});
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    metrics::FamilySet f;
    std::vector<prometheus::MetricFamily> histograms;
    for (size_t n = 0; n < state_.nics.size(); ++n) {
      const auto& nic = state_.nics[n];
      const std::string device = device_name(static_cast<int>(n));
      const metrics::LabelList l = {{"device", device}, {"port", "1"}};
      port_series(f, device, l, nic);
      add_histograms(histograms, l, nic);
      for (size_t p = 0; p < nic.priorities.size(); ++p) {
        const metrics::LabelList pl = {{"device", device}, {"port", "1"}, {"priority", std::to_string(p)}};
        const auto& v = nic.priorities[p];
        f.counter("rdmad_prio_received_bytes_total", "Bytes received on the priority.", pl, double(v[0]));
        f.counter("rdmad_prio_transmitted_bytes_total", "Bytes transmitted on the priority.", pl,
                  double(v[1]));
        f.counter("rdmad_prio_received_packets_total", "Packets received on the priority.", pl, double(v[2]));
        f.counter("rdmad_prio_transmitted_packets_total", "Packets transmitted on the priority.", pl,
                  double(v[3]));
        f.counter("rdmad_prio_pause_received_total", "PFC pause frames received on the priority.", pl,
                  double(v[4]));
        f.counter("rdmad_prio_pause_transmitted_total", "PFC pause frames sent on the priority.", pl,
                  double(v[5]));
      }
      for (size_t i = 0; i < nic.flows.size(); ++i) {
        const metrics::LabelList fl = {{"device", device}, {"port", "1"}, {"flow", std::to_string(i)}};
        const auto& fw = nic.flows[i];
        f.gauge("rdmad_flow_rate_bits_per_second", "Current DCQCN rate of the flow.", fl, double(fw.rate_mbps) * 1e6);
        f.gauge("rdmad_flow_target_rate_bits_per_second", "DCQCN target rate of the flow.", fl,
                double(fw.target_mbps) * 1e6);
        f.counter("rdmad_flow_cnp_received_total", "CNPs applied to the flow.", fl, double(fw.cnps));
        f.counter("rdmad_flow_transmitted_bytes_total", "Bytes sent by the flow.", fl, double(fw.bytes));
      }
      balancer_series(f, l, nic);
    }
    for (const auto& u : state_.uids) uid_series(f, u);
    auto families = f.take();
    for (auto& h : histograms) families.push_back(std::move(h));
    return families;
  }

 private:
  static void port_series(metrics::FamilySet& f, const std::string& device, const metrics::LabelList& l,
                          const NodeState::Nic& nic) {
    f.gauge("rdmad_nic_info", "Always 1; one series per NIC port with its backend and link layer.",
            {{"device", device},
             {"port", "1"},
             {"backend", "rdma_core"},
             {"link_layer", "Ethernet"},
             {"nic", device}},
            1);
    f.gauge("rdmad_state_id", "Port state as sysfs numbers it (1 DOWN, 2 INIT, 4 ACTIVE).", l, 4);
    f.gauge("rdmad_rate_bytes_per_second", "Port link speed in bytes per second.", l, 5e10);
    const char* names[] = {"rdmad_port_data_received_bytes_total",
                           "rdmad_port_data_transmitted_bytes_total",
                           "rdmad_port_packets_received_total",
                           "rdmad_port_packets_transmitted_total",
                           "rdmad_np_cnp_packets_sent_total",
                           "rdmad_np_ecn_marked_roce_packets_received_total",
                           "rdmad_rp_cnp_packets_handled_total",
                           "rdmad_rp_cnp_ignored_packets_received_total",
                           "rdmad_out_of_sequence_packets_received_total",
                           "rdmad_packet_sequence_errors_total",
                           "rdmad_local_ack_timeout_errors_total",
                           "rdmad_retransmitted_packets_total",
                           "rdmad_duplicate_requests_total",
                           "rdmad_rnr_nak_received_total",
                           "rdmad_remote_access_errors_total",
                           "rdmad_port_rx_dropped_packets_total"};
    for (size_t i = 0; i < nic.port.size(); ++i)
      f.counter(names[i], "A per-port counter of the datapath.", l, double(nic.port[i]));
  }

  static void balancer_series(metrics::FamilySet& f, const metrics::LabelList& l, const NodeState::Nic& nic) {
    const char* gauges[] = {"rdmad_balancer_flows", "rdmad_balancer_weight", "rdmad_balancer_load_ratio",
                            "rdmad_balancer_headroom_bits_per_second", "rdmad_balancer_pinned_flows"};
    const char* counters[] = {"rdmad_balancer_assigned_total", "rdmad_balancer_moved_total",
                              "rdmad_balancer_rejected_total", "rdmad_balancer_rebalances_total",
                              "rdmad_balancer_failovers_total"};
    for (size_t i = 0; i < 5; ++i) {
      f.gauge(gauges[i], "A balancer gauge for the NIC.", l, double(nic.balancer[i]));
      f.counter(counters[i], "A balancer counter for the NIC.", l, double(nic.balancer[5 + i]));
    }
  }

  static void uid_series(metrics::FamilySet& f, const NodeState::Uid& u) {
    const std::string uid = std::to_string(u.uid);
    const metrics::LabelList host = {{"uid", uid}, {"kind", "host"}};
    const metrics::LabelList gpu = {{"uid", uid}, {"kind", "gpu"}};
    const metrics::LabelList l = {{"uid", uid}};
    f.gauge("rdmad_uid_registrations", "Memory regions registered by the uid.", host, double(u.regions_host));
    f.gauge("rdmad_uid_registrations", "Memory regions registered by the uid.", gpu, double(u.regions_gpu));
    f.gauge("rdmad_uid_registered_bytes", "Bytes registered by the uid.", host, double(u.bytes_host));
    f.gauge("rdmad_uid_registered_bytes", "Bytes registered by the uid.", gpu, double(u.bytes_gpu));
    f.gauge("rdmad_uid_quota_usage_ratio", "Quota usage of the uid, 0..1.", l, u.quota_ratio);
    f.counter("rdmad_uid_requests_total", "Client requests from the uid.", l, double(u.requests));
    f.gauge("rdmad_uid_clients_connected", "Connections open by the uid.", l, double(u.clients));
  }

  void add_histograms(std::vector<prometheus::MetricFamily>& out, const metrics::LabelList& l,
                      const NodeState::Nic& nic) const {
    const size_t count = std::min(nic.buckets.size(), static_cast<size_t>(shape_.histograms_per_nic));
    for (size_t h = out.size(); h < count; ++h)
      out.push_back({kHistograms[h], "A per-NIC latency histogram.", prometheus::MetricType::Histogram, {}});
    for (size_t h = 0; h < count; ++h) {
      prometheus::ClientMetric m;
      for (const auto& [k, v] : l) m.label.push_back({k, v});
      double bound = 1e-6;
      for (uint64_t c : nic.buckets[h]) {
        m.histogram.bucket.push_back({c, bound});
        bound *= 2;
      }
      m.histogram.bucket.push_back({nic.buckets[h].back(), std::numeric_limits<double>::infinity()});
      m.histogram.sample_count = nic.buckets[h].back();
      m.histogram.sample_sum = static_cast<double>(nic.buckets[h].back()) * 3.7e-5;
      out[h].metric.push_back(std::move(m));
    }
  }

  NodeShape shape_;
  NodeState state_;
};

}  // namespace

std::shared_ptr<prometheus::Collectable> populate_node(prometheus::Registry& registry,
                                                       const NodeShape& shape) {
  uint64_t s = 7;
  for (const char* name : kPortCounters) {
    auto& family = prometheus::BuildCounter()
                       .Name(std::string("rdmad_hw_") + name + "_total")
                       .Help("A hardware counter of the port.")
                       .Register(registry);
    for (int n = 0; n < shape.nics; ++n)
      family.Add({{"device", device_name(n)}, {"port", "1"}}).Increment(static_cast<double>(next(s)));
  }
  for (const char* name : kPortGauges) {
    auto& family = prometheus::BuildGauge()
                       .Name(std::string("rdmad_hw_") + name)
                       .Help("A hardware attribute of the port.")
                       .Register(registry);
    for (int n = 0; n < shape.nics; ++n)
      family.Add({{"device", device_name(n)}, {"port", "1"}}).Set(static_cast<double>(next(s) % 1000));
  }
  auto& requests = prometheus::BuildCounter()
                       .Name("rdmad_client_requests_total")
                       .Help("Client requests by operation and result")
                       .Register(registry);
  for (int op = 0; op < shape.request_ops; ++op)
    for (int result = 0; result < 13; ++result)
      requests.Add({{"op", "op" + std::to_string(op)}, {"result", "result" + std::to_string(result)}})
          .Increment(static_cast<double>(next(s) % 100000));
  auto& duration =
      prometheus::BuildHistogram()
          .Name("rdmad_registration_duration_seconds")
          .Help("Time to serve a memory registration request, validation to reply")
          .Register(registry)
          .Add({}, prometheus::Histogram::BucketBoundaries{1e-6, 4e-6, 16e-6, 64e-6, 256e-6, 1e-3, 4e-3,
                                                           16e-3, 64e-3, 0.25, 1.0, 4.0});
  for (int i = 0; i < 1000; ++i) duration.Observe(static_cast<double>(next(s) % 1000) * 1e-6);
  return std::make_shared<NodeCollector>(shape);
}

}  // namespace rdmad::bench
