#pragma once
// Per-NIC transport counters, named like the mlx5 hw_counters
// (/sys/class/infiniband/<dev>/ports/<p>/hw_counters/*) so metrics and dashboards treat soft and
// hardware NICs alike. A snapshot is summed at read time from the datapath's own counters.
#include <cstdint>

namespace rdmad::verbs {

struct NicCounters {
  // congestion control (DCQCN)
  uint64_t np_ecn_marked_roce_packets = 0;  // CE-marked data packets received
  uint64_t np_cnp_sent = 0;                 // CNPs sent by the notification point
  uint64_t rp_cnp_handled = 0;              // CNPs received and applied by the reaction point
  uint64_t rp_cnp_ignored = 0;              // CNPs for an unknown QP or with CC disabled
  // reliability
  uint64_t out_of_sequence = 0;        // requests received with a PSN beyond the expected one
  uint64_t packet_seq_err = 0;         // PSN sequence error NAKs received
  uint64_t local_ack_timeout_err = 0;  // requester retransmission timeouts
  uint64_t duplicate_request = 0;      // requests received with an already-seen PSN
  uint64_t rnr_nak_retry_err = 0;      // RNR NAKs received
  uint64_t req_remote_access_errors = 0;  // remote access error NAKs received
  uint64_t resp_remote_access_errors = 0;  // access violations detected as responder
  uint64_t implied_nak_seq_err = 0;    // READ response gaps that forced a re-request
  // traffic
  uint64_t tx_packets = 0;
  uint64_t rx_packets = 0;
  uint64_t tx_bytes = 0;   // UDP payload bytes
  uint64_t rx_bytes = 0;
  uint64_t rx_dropped = 0;  // malformed, unknown QP, or wrong state
  uint64_t retransmitted_packets = 0;
  // datapath thread (software backends; 0 where a NIC does the work)
  uint64_t datapath_cpu_ns = 0;  // CPU time the NIC's datapath thread has used
  uint64_t datapath_sleeps = 0;  // times it went to sleep with nothing to do
  uint64_t crc_at_post_packets = 0;  // packets sent with a payload CRC the posting thread computed
};

}  // namespace rdmad::verbs
