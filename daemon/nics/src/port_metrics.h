#pragma once
// The per-port series every NIC exports, whatever its backend: node_exporter's InfiniBand names
// under the rdmad_ prefix, labelled device and port, so dashboards treat soft and hardware NICs
// alike. Values a backend does not have are left out (nullopt), not reported as zero.
#include <cstdint>
#include <optional>
#include <string>

#include "rdmad/metrics/family_set.h"
#include "rdmad/verbs/counters.h"

namespace rdmad::daemon {

struct PortInfoValues {
  std::string device;
  std::string port;
  std::string backend;
  std::string link_layer;  // "Ethernet" | "InfiniBand"
  std::string nic;         // [[nic]] name, "" when no [[nic]] names the port
  int state_id = 0;        // sysfs numbering: 1 DOWN, 2 INIT, 4 ACTIVE
  double rate_bytes_per_second = 0;
};

struct PortCounterValues {
  std::optional<uint64_t> rx_bytes, tx_bytes, rx_packets, tx_packets;
  std::optional<uint64_t> np_cnp_sent, np_ecn_marked, rp_cnp_handled, rp_cnp_ignored;
  std::optional<uint64_t> out_of_sequence, packet_seq_err, local_ack_timeout_err;
};

// rdmad_nic_info, rdmad_state_id, rdmad_rate_bytes_per_second.
void add_port_info(metrics::FamilySet& f, const PortInfoValues& v);
// The data, packet, DCQCN and reliability counters.
void add_port_counters(metrics::FamilySet& f, const metrics::LabelList& labels, const PortCounterValues& v);

// rdmad_rx_dropped_packets_total{reason}: one series per verbs::RxDropReason, zeros included, so an
// alert has a series to watch before the first drop (software NICs; hardware keeps its own).
void add_rx_drops(metrics::FamilySet& f, const metrics::LabelList& labels,
                  const std::array<uint64_t, verbs::kRxDropReasons>& by_reason);

}  // namespace rdmad::daemon
