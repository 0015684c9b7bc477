#pragma once
// The per-NIC-port families, declared once: port_metrics.cc (the series every backend has),
// nic_inventory.cc (soft NICs: their extra counters and the DCQCN histograms) and hardware_nics.cc
// (sysfs driver counters, CC health and parameters). node_exporter's InfiniBand names under the
// rdmad_ prefix; every series is labelled device and port.
#include "rdmad/metrics/metric.h"

namespace rdmad::daemon::port_metric {

using metrics::Kind;
using metrics::Metric;

inline constexpr Metric kNicInfo{"rdmad_nic_info", "Always 1; one series per NIC port with its backend and link layer.",
                                 Kind::kGauge};
inline constexpr Metric kStateId{"rdmad_state_id", "Port state as sysfs numbers it (1 DOWN, 2 INIT, 4 ACTIVE).",
                                 Kind::kGauge};
inline constexpr Metric kRate{"rdmad_rate_bytes_per_second", "Port link speed in bytes per second.", Kind::kGauge};

inline constexpr Metric kRxBytes{"rdmad_port_data_received_bytes_total", "Bytes received.", Kind::kCounter};
inline constexpr Metric kTxBytes{"rdmad_port_data_transmitted_bytes_total", "Bytes transmitted.", Kind::kCounter};
inline constexpr Metric kRxPackets{"rdmad_port_packets_received_total", "Packets received.", Kind::kCounter};
inline constexpr Metric kTxPackets{"rdmad_port_packets_transmitted_total", "Packets transmitted.", Kind::kCounter};
inline constexpr Metric kNpCnpSent{"rdmad_np_cnp_packets_sent_total", "CNPs sent by the notification point.",
                                   Kind::kCounter};
inline constexpr Metric kNpEcnMarked{"rdmad_np_ecn_marked_roce_packets_received_total",
                                     "CE-marked RoCEv2 packets received.", Kind::kCounter};
inline constexpr Metric kRpCnpHandled{"rdmad_rp_cnp_packets_handled_total", "CNPs applied by the reaction point.",
                                      Kind::kCounter};
inline constexpr Metric kRpCnpIgnored{"rdmad_rp_cnp_ignored_packets_received_total",
                                      "CNPs received from a QP's peer but not applied (congestion control off).",
                                      Kind::kCounter};
inline constexpr Metric kOutOfSequence{"rdmad_out_of_sequence_packets_received_total",
                                       "Requests received with a PSN beyond the expected one.", Kind::kCounter};
inline constexpr Metric kPacketSeqErr{"rdmad_packet_sequence_errors_total", "PSN sequence error NAKs received.",
                                      Kind::kCounter};
inline constexpr Metric kLocalAckTimeoutErr{"rdmad_local_ack_timeout_errors_total",
                                            "Requester retransmission timeouts.", Kind::kCounter};
inline constexpr Metric kRxDroppedByReason{
    "rdmad_rx_dropped_packets_total",
    "Packets the software datapath dropped on receive, by reason (docs/verbs.md, \"Drop reasons\").", Kind::kCounter};

// Soft NICs only (their datapath is ours).
inline constexpr Metric kRetransmitted{"rdmad_retransmitted_packets_total", "Packets retransmitted.", Kind::kCounter};
inline constexpr Metric kDuplicateRequests{"rdmad_duplicate_requests_total",
                                           "Requests received with an already-seen PSN.", Kind::kCounter};
inline constexpr Metric kRnrNakReceived{"rdmad_rnr_nak_received_total", "RNR NAKs received.", Kind::kCounter};
inline constexpr Metric kRemoteAccessErrors{"rdmad_remote_access_errors_total",
                                            "Remote access errors detected as responder.", Kind::kCounter};
// The sum of rdmad_rx_dropped_packets_total over its reasons.
inline constexpr Metric kRxDropped{"rdmad_port_rx_dropped_packets_total", "Packets dropped on receive, for any reason.",
                                   Kind::kCounter};
// The software datapath's own thread: its rate is the share of a core it uses (1.0 = saturated).
inline constexpr Metric kDatapathCpu{"rdmad_datapath_cpu_seconds_total",
                                     "CPU time used by the NIC's software datapath thread.", Kind::kCounter};
inline constexpr Metric kDatapathSleeps{"rdmad_datapath_sleeps_total",
                                        "Times the software datapath thread slept with nothing to do.", Kind::kCounter};
inline constexpr Metric kDcqcnRate{"rdmad_dcqcn_rate_bits_per_second",
                                   "Pacing rate of the software reaction point per QP in bits per second, sampled "
                                   "every second",
                                   Kind::kHistogram};
// The same samples in Mb/s, under the name of the previous release (not a base unit).
inline constexpr Metric kDcqcnRateMbpsDeprecated{
    "rdmad_dcqcn_rate_mbps", "DEPRECATED: use rdmad_dcqcn_rate_bits_per_second; removed in the next release",
    Kind::kHistogram};
inline constexpr Metric kDcqcnAlpha{"rdmad_dcqcn_alpha", "DCQCN α per QP, sampled every second", Kind::kHistogram};

// Hardware NICs (sysfs).
inline constexpr Metric kHwCounter{"rdmad_hw_counter_total", "The port's driver counters as sysfs hw_counters/ shows them.",
                                   Kind::kCounter};
inline constexpr Metric kCcMisconfigured{"rdmad_cc_misconfigured",
                                         "1 while a congestion-control misconfiguration is seen on the port, by reason.",
                                         Kind::kGauge};
inline constexpr Metric kCcParamsInfo{"rdmad_cc_params_info",
                                      "Always 1; the NIC's DCQCN parameters in force as labels (mlx5 knobs).",
                                      Kind::kGauge};

}  // namespace rdmad::daemon::port_metric
