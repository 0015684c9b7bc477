#pragma once
// Datapath state of one RC queue pair. Owned by one of the NIC's datapath threads; the application
// side only touches QpShared (the SPSC rings, and the payload CRCs it computes at post).
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "rdmad/cc/notification_point.h"
#include "rdmad/cc/pacer.h"
#include "rdmad/cc/reaction_point.h"
#include "rdmad/cc/time.h"
#include "rdmad/roce/crc32.h"
#include "rdmad/roce/ip_udp.h"
#include "rdmad/verbs/types.h"
#include "spsc_ring.h"

namespace rdmad::verbs::engine {

using cc::TimeNs;

/// Completion queue storage: the datapaths produce, the application consumes. QPs of different
/// datapath threads may share a CQ, so each thread has a ring of its own (single producer each; a
/// QP's completions come from one thread, so they stay in order) and a poll takes from all of them.
struct CqShared {
  CqShared(uint32_t depth, uint32_t nic, uint32_t datapaths);
  ~CqShared();
  CqShared(const CqShared&) = delete;
  CqShared& operator=(const CqShared&) = delete;
  /// The consumer: up to out.size() completions, from every thread's ring.
  size_t pop(std::span<WorkCompletion> out);
  std::vector<std::unique_ptr<SpscRing<WorkCompletion>>> rings;  // one per datapath thread
  uint32_t next_ring = 0;  // the consumer's: the ring its next poll starts at
  uint32_t nic_id;
  // Completion notification: the consumer sets `armed`; the datapath's next push clears it and
  // writes `event_fd` (a non-blocking eventfd; -1 if it could not be created).
  std::atomic<bool> armed{false};
  int event_fd = -1;
};

/// Payload CRCs the posting thread computed for one send WR (the crc_at_post option): the
/// CRC-32 of each of its first `count` path-MTU segments (`mtu` bytes each), at ring positions
/// `first`... of PostCrcRing. count 0: the datapath computes every CRC itself.
struct PostCrc {
  uint64_t first = 0;
  uint32_t count = 0;
  uint32_t mtu = 0;
};

/// Where the posting thread leaves payload CRCs for the datapath. The producer fills entries
/// before it publishes the WR that names them (the send queue's release store); the datapath frees
/// them in order as it releases WRs.
struct PostCrcRing {
  static constexpr uint32_t kEntries = 4096;  // 16 MiB of payload at a 4096-byte path MTU
  std::unique_ptr<uint32_t[]> crcs;           // allocated by the producer on first use
  uint64_t tail = 0;                          // producer only
  std::atomic<uint64_t> head{0};              // entries below it are free again
  // Odd while the producer reads application memory. Deregistration clears the region's key, then
  // waits for an odd value to change before the caller may unmap the memory (Nic::wait_posts).
  std::atomic<uint64_t> reading{0};
  uint32_t& at(uint64_t i) { return crcs[i & (kEntries - 1)]; }
};

/// What the application and the datapath share for one QP.
struct QpShared {
  QpShared(uint32_t sq_depth, uint32_t rq_depth) : sq(sq_depth), rq(rq_depth), post_crc(sq.capacity()) {}
  SpscRing<SendWr> sq;
  SpscRing<RecvWr> rq;
  std::atomic<QpState> state{QpState::kReset};
  std::atomic<uint32_t> mtu{0};   // path MTU, set on RTR before the state is published
  std::vector<PostCrc> post_crc;  // per send-queue slot, written before the WR is published
  PostCrcRing crc_ring;
};

/// Requester bookkeeping per send-queue slot (parallel to QpShared::sq).
struct SendSlot {
  uint32_t first_psn = 0;
  uint32_t npkts = 0;          // PSNs the message takes (READ: response packets)
  uint32_t read_next_psn = 0;  // READ: next response PSN expected
  WcStatus error = WcStatus::kSuccess;  // local error found when the WR was accepted
};

/// One pending responder action, emitted in order so an ACK never overtakes a READ response.
struct Response {
  enum class Kind : uint8_t { kAck, kNak, kRead } kind = Kind::kAck;
  uint8_t syndrome = 0;
  uint32_t psn = 0;       // ACK/NAK: the PSN; READ: the next response PSN to send
  uint32_t last_psn = 0;  // READ: PSN of the last response packet
  uint32_t first_psn = 0;  // READ: PSN of the first response packet of the request
  uint64_t va = 0;        // READ: address of the first byte of the request
  uint32_t length = 0;    // READ: bytes of the request
  uint32_t rkey = 0;      // READ: the key checked again before each response packet
};

/// The timers each QP keeps on its datapath's timing wheel (Datapath::arm); the wheel names them
/// QpContext::slot · kQpTimers + kind.
enum QpTimer : uint32_t {
  kRetransmitTimer,    // the go-back-N timeout; checked lazily, re-armed when progress moved it
  kSendTimer,          // the QP may send again: the pacer's next departure, or the end of an RNR wait
  kReactionTimer,      // the DCQCN reaction point's next event (increase timer, deferred cut)
  kNotificationTimer,  // the notification point's deferred CNP
  kQpTimers,
};

struct QpContext {
  uint32_t qpn = 0;
  uint32_t slot = 0;  // the QP's place among its datapath's: table index / datapath count
  uint32_t pd_id = 0;
  std::shared_ptr<QpShared> shared;
  std::shared_ptr<CqShared> send_cq;
  std::shared_ptr<CqShared> recv_cq;
  QpAttr attr;
  QpState state = QpState::kReset;
  uint32_t mtu = 1024;
  uint32_t path = 0;       // the port queue's handle for where packets go (PortQueue::open_path)
  bool path_open = false;
  roce::IpUdpInfo ip;      // IP/UDP description of our packets to the peer (for the ICRC)
  const roce::Crc32Shift* mtu_shift = nullptr;  // combines a full segment's CRC into an ICRC

  // ---- requester ----
  std::vector<SendSlot> slots;
  uint64_t accepted = 0;   // absolute SQ index: WRs below it have PSNs assigned
  uint32_t next_assign_psn = 0;
  uint64_t send_idx = 0;   // absolute SQ index of the WR being transmitted
  uint32_t send_psn = 0;   // next PSN to transmit
  uint32_t sent_hi = 0;    // one past the highest PSN transmitted
  uint32_t una_psn = 0;    // oldest PSN not acknowledged
  TimeNs last_progress_ns = 0;
  TimeNs last_ack_req_ns = 0;  // when a data packet last asked for an ACK
  TimeNs rnr_until_ns = 0;
  uint8_t retries_left = 7;
  uint8_t rnr_left = 7;
  bool gbn_active = false;  // rewound to gbn_psn and not yet past it: ignore repeats of the same cause
  uint32_t gbn_psn = 0;

  // ---- responder ----
  uint32_t epsn = 0;
  uint32_t msn = 0;
  bool nak_sent = false;   // a sequence NAK for epsn is out; stay quiet until epsn moves
  bool recv_active = false;  // a multi-packet SEND is being placed into the head receive WR
  uint32_t recv_offset = 0;
  uint64_t write_va = 0;    // next byte of the WRITE in progress
  uint32_t write_left = 0;  // bytes still expected for it
  uint32_t write_len = 0;   // bytes of the whole WRITE (reported with an immediate)
  uint32_t write_rkey = 0;  // its key: every later packet is checked against the region again
  std::vector<Response> responses;  // ring
  uint32_t resp_head = 0;
  uint32_t resp_count = 0;

  // ---- congestion control (DCQCN; data packets of both directions are paced) ----
  cc::RpState rp;
  cc::NpState np;
  cc::PacerState pacer;
  double paced_rate_mbps = 0;  // the rate the pacer's current gap was set at

  // ---- datapath scheduling (datapath_timers.cc) ----
  bool active = false;   // on Datapath::active_: a loop pass gives it a transmit turn
  bool cq_full = false;  // a completion did not fit its CQ: retry every pass until it does
  // When each wheel timer is due; kNever: not scheduled. A timer is re-armed only to an earlier
  // time; one that fires early (its state moved on) re-arms at the real time.
  std::array<TimeNs, kQpTimers> timer_due{cc::kNever, cc::kNever, cc::kNever, cc::kNever};
};

}  // namespace rdmad::verbs::engine
