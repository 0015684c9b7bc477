#include "port_metrics.h"

namespace rdmad::daemon {

void add_port_info(metrics::FamilySet& f, const PortInfoValues& v) {
  const metrics::LabelList l = {{"device", v.device}, {"port", v.port}};
  f.gauge("rdmad_nic_info", "Always 1; one series per NIC port with its backend and link layer.",
          {{"device", v.device}, {"port", v.port}, {"backend", v.backend}, {"link_layer", v.link_layer},
           {"nic", v.nic}},
          1);
  f.gauge("rdmad_state_id", "Port state as sysfs numbers it (1 DOWN, 2 INIT, 4 ACTIVE).", l, v.state_id);
  f.gauge("rdmad_rate_bytes_per_second", "Port link speed in bytes per second.", l, v.rate_bytes_per_second);
}

void add_port_counters(metrics::FamilySet& f, const metrics::LabelList& l, const PortCounterValues& v) {
  auto c = [&](const char* name, const char* help, const std::optional<uint64_t>& x) {
    if (x) f.counter(name, help, l, static_cast<double>(*x));
  };
  c("rdmad_port_data_received_bytes_total", "Bytes received.", v.rx_bytes);
  c("rdmad_port_data_transmitted_bytes_total", "Bytes transmitted.", v.tx_bytes);
  c("rdmad_port_packets_received_total", "Packets received.", v.rx_packets);
  c("rdmad_port_packets_transmitted_total", "Packets transmitted.", v.tx_packets);
  c("rdmad_np_cnp_packets_sent_total", "CNPs sent by the notification point.", v.np_cnp_sent);
  c("rdmad_np_ecn_marked_roce_packets_received_total", "CE-marked RoCEv2 packets received.", v.np_ecn_marked);
  c("rdmad_rp_cnp_packets_handled_total", "CNPs applied by the reaction point.", v.rp_cnp_handled);
  c("rdmad_rp_cnp_ignored_packets_received_total",
    "CNPs received from a QP's peer but not applied (congestion control off).", v.rp_cnp_ignored);
  c("rdmad_out_of_sequence_packets_received_total", "Requests received with a PSN beyond the expected one.",
    v.out_of_sequence);
  c("rdmad_packet_sequence_errors_total", "PSN sequence error NAKs received.", v.packet_seq_err);
  c("rdmad_local_ack_timeout_errors_total", "Requester retransmission timeouts.", v.local_ack_timeout_err);
}

void add_rx_drops(metrics::FamilySet& f, const metrics::LabelList& labels,
                  const std::array<uint64_t, verbs::kRxDropReasons>& by_reason) {
  metrics::LabelList l = labels;
  l.emplace_back("reason", "");
  for (size_t r = 0; r < verbs::kRxDropReasons; ++r) {
    l.back().second = verbs::kRxDropReasonNames[r];
    f.counter("rdmad_rx_dropped_packets_total",
              "Packets the software datapath dropped on receive, by reason (docs/verbs.md, \"Drop reasons\").", l,
              static_cast<double>(by_reason[r]));
  }
}

}  // namespace rdmad::daemon
