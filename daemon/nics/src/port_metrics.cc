#include "port_metrics.h"

#include "port_metric_table.h"

namespace rdmad::daemon {

void add_port_info(metrics::FamilySet& f, const PortInfoValues& v) {
  const metrics::LabelList l = {{"device", v.device}, {"port", v.port}};
  f.add(port_metric::kNicInfo,
        {{"device", v.device}, {"port", v.port}, {"backend", v.backend}, {"link_layer", v.link_layer}, {"nic", v.nic}},
        1);
  f.add(port_metric::kStateId, l, v.state_id);
  f.add(port_metric::kRate, l, v.rate_bytes_per_second);
}

void add_port_counters(metrics::FamilySet& f, const metrics::LabelList& l, const PortCounterValues& v) {
  auto c = [&](const metrics::Metric& m, const std::optional<uint64_t>& x) {
    if (x) f.add(m, l, static_cast<double>(*x));
  };
  c(port_metric::kRxBytes, v.rx_bytes);
  c(port_metric::kTxBytes, v.tx_bytes);
  c(port_metric::kRxPackets, v.rx_packets);
  c(port_metric::kTxPackets, v.tx_packets);
  c(port_metric::kNpCnpSent, v.np_cnp_sent);
  c(port_metric::kNpEcnMarked, v.np_ecn_marked);
  c(port_metric::kRpCnpHandled, v.rp_cnp_handled);
  c(port_metric::kRpCnpIgnored, v.rp_cnp_ignored);
  c(port_metric::kOutOfSequence, v.out_of_sequence);
  c(port_metric::kPacketSeqErr, v.packet_seq_err);
  c(port_metric::kLocalAckTimeoutErr, v.local_ack_timeout_err);
}

void add_rx_drops(metrics::FamilySet& f, const metrics::LabelList& labels,
                  const std::array<uint64_t, verbs::kRxDropReasons>& by_reason) {
  metrics::LabelList l = labels;
  l.emplace_back("reason", "");
  for (size_t r = 0; r < verbs::kRxDropReasons; ++r) {
    l.back().second = verbs::kRxDropReasonNames[r];
    f.add(port_metric::kRxDroppedByReason, l, static_cast<double>(by_reason[r]));
  }
}

}  // namespace rdmad::daemon
