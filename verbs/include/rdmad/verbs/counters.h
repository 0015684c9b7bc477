#pragma once
// Per-NIC transport counters, named like the mlx5 hw_counters
// (/sys/class/infiniband/<dev>/ports/<p>/hw_counters/*) so metrics and dashboards treat soft and
// hardware NICs alike. A snapshot is summed at read time from the datapath's own counters.
#include <array>
#include <cstddef>
#include <cstdint>

namespace rdmad::verbs {

/// Why a NIC's receive side dropped a packet (software backends; rdmad_rx_dropped_packets_total's
/// `reason` label is the name). Every packet not used is counted under exactly one reason.
enum class RxDropReason : uint8_t {
  kTruncated,    // shorter than its headers, or cut short by the receive buffer
  kMalformed,    // not a valid RoCEv2 packet (opcode, version, pad, length) or not one a QP takes
  kBadIcrc,      // its ICRC does not match the packet and the IP/UDP headers it arrived with
  kUnknownQp,    // no QP has that number
  kBadState,     // the QP is in RESET, INIT or ERR (ACKs and READ responses: not in RTS)
  kWrongSource,  // not from the QP's peer (address, RoCEv2 source ports) nor the NIC's relay
  kOutOfWindow,  // an ACK, NAK or READ response for no PSN outstanding, or a READ re-request
                 // reaching past the PSNs the responder has seen
  kQueueOverflow,  // lost before the datapath read it: its receive queue was full (soft: the
                   // socket's receive buffer; dpdk: the port's ring, its mbuf pool, or the ring
                   // that hands packets over to another datapath thread)
  kCount,
};
inline constexpr size_t kRxDropReasons = static_cast<size_t>(RxDropReason::kCount);
inline constexpr std::array<const char*, kRxDropReasons> kRxDropReasonNames = {
    "truncated", "malformed", "bad_icrc", "unknown_qp", "bad_state", "wrong_source", "out_of_window",
    "queue_overflow"};

struct NicCounters {
  // congestion control (DCQCN)
  uint64_t np_ecn_marked_roce_packets = 0;  // CE-marked data packets received
  uint64_t np_cnp_sent = 0;                 // CNPs sent by the notification point
  uint64_t rp_cnp_handled = 0;              // CNPs received and applied by the reaction point
  uint64_t rp_cnp_ignored = 0;              // CNPs from a QP's peer with CC disabled
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
  uint64_t rx_dropped = 0;  // packets dropped on receive; soft NICs: the sum of rx_dropped_by_reason
  std::array<uint64_t, kRxDropReasons> rx_dropped_by_reason{};  // indexed by RxDropReason (soft)
  uint64_t retransmitted_packets = 0;
  // datapath thread (software backends; 0 where a NIC does the work)
  uint64_t datapath_cpu_ns = 0;  // CPU time the NIC's datapath thread has used
  uint64_t datapath_sleeps = 0;  // times it went to sleep with nothing to do
  uint64_t crc_at_post_packets = 0;  // packets sent with a payload CRC the posting thread computed
};

}  // namespace rdmad::verbs
