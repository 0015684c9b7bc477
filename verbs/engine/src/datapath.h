#pragma once
// One RoCEv2 NIC of the engine: a PacketPort, the NIC's memory-region table and QP table (Nic), and
// one or more datapath threads (Datapath), each owning a share of the QPs — those whose table index
// leaves its number as remainder (PortSteering) — with their DCQCN state, timers and counters, and
// one queue of the port. Control calls (create/modify/destroy) reach a QP's datapath through a
// bounded command queue and wait for it; registration fills the shared region table from the
// caller's thread. The hot path takes no locks.
#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "ids.h"
#include "qp_context.h"
#include "rdmad/base/command_queue.h"
#include "rdmad/base/heartbeat.h"
#include "rdmad/cc/notification_point.h"
#include "rdmad/cc/pacer.h"
#include "rdmad/cc/reaction_point.h"
#include "rdmad/cc/timing_wheel.h"
#include "rdmad/roce/packet.h"
#include "rdmad/verbs/counters.h"
#include "rdmad/verbs/engine/engine.h"
#include "rdmad/verbs/engine/packet_port.h"
#include "rdmad/verbs/registry.h"
#include "spsc_ring.h"

namespace rdmad::verbs::engine {

// RoCEv2 source ports (the RoCEv2 annex reserves 49152-65535 for the entropy of ECMP hashing).
inline constexpr uint16_t kSourcePortMin = 49152;
// Requester bytes in flight per QP (as packets of the path MTU, at least 64): enough for loopback
// bandwidth, small enough that a go-back-N re-send does not flood a switch buffer.
inline constexpr uint32_t kWindowBytes = 1u << 20;
inline constexpr uint32_t window_psns(uint32_t mtu) { return kWindowBytes / mtu < 64 ? 64 : kWindowBytes / mtu; }
inline constexpr uint32_t kResponseDepth = 64;
inline constexpr TimeNs kPacingCatchUpNs = 200'000;
// Ethernet + IPv4 + UDP + BTH + ICRC + FCS around a payload, counted by the pacer and DCQCN.
inline constexpr size_t kWireOverheadBytes = 14 + 20 + 8 + 12 + 4 + 4;
// Granularity of a datapath's timing wheel: a timer fires at most this late. Below the pacing gap
// of a 4 KiB packet at 32 Gb/s and the shortest retransmit timeout (8 µs); a pacer woken late sends
// the departures it owes back to back (kPacingCatchUpNs), so the rate does not suffer.
inline constexpr TimeNs kWheelSlotNs = 1000;
// Payloads at least this long leave from where they are (PortQueue::tx_commit with the payload as
// its own piece); shorter ones are encoded into the slot, where one piece costs the port less.
inline constexpr size_t kGatherMinPayloadBytes = 256;
// A pass's transmit rounds: at most kPassRounds, each giving every active QP a turn of at most
// kTurnPackets packets, and at most kPassPacketBudget packets in all before the pass receives again.
inline constexpr int kPassRounds = 16;
inline constexpr int kTurnPackets = 16;
inline constexpr uint64_t kPassPacketBudget = kPassRounds * kTurnPackets;
// Packets one receive call takes, and the most a pass takes in before it transmits.
inline constexpr size_t kRxBurst = 64;
inline constexpr size_t kRxPassPackets = 1024;
// The most datapath threads one NIC runs.
inline constexpr uint32_t kMaxDatapathThreads = 64;

// A counter one thread (a datapath) writes and any thread reads: relaxed loads and stores, so the
// hot path has no locked instruction and a reader (a scrape) never waits for the datapath, a
// stalled one included. Completions are published with release after the counts they follow, so
// a reader that saw a completion sees its counts.
class Counter {
 public:
  Counter& operator++() { return *this += 1; }
  Counter& operator+=(uint64_t n) {
    v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    return *this;
  }
  operator uint64_t() const { return v_.load(std::memory_order_relaxed); }  // NOLINT: reads as the number

 private:
  std::atomic<uint64_t> v_{0};
};

// A datapath's NicCounters as it keeps them (NicCounters' fields, Counter for uint64_t).
struct LiveCounters {
  Counter np_ecn_marked_roce_packets, np_cnp_sent, rp_cnp_handled, rp_cnp_ignored;
  Counter out_of_sequence, packet_seq_err, local_ack_timeout_err, duplicate_request, rnr_nak_retry_err;
  Counter req_remote_access_errors, resp_remote_access_errors, implied_nak_seq_err;
  Counter tx_packets, rx_packets, tx_bytes, rx_bytes;
  std::array<Counter, kRxDropReasons> rx_dropped_by_reason;
  Counter retransmitted_packets, datapath_sleeps, crc_at_post_packets;
};

// Payloads of at least this many bytes get their CRCs computed by the posting thread.
inline constexpr uint32_t kCrcAtPostMinBytes = 16384;

/// A memory-region table entry. Registering threads fill and empty it (under Nic::mr_mu_); the
/// datapaths and posting threads (crc_at_post) read it seqlock style: the key is stored last when
/// an entry is filled and cleared first when it is emptied, and a reader trusts the fields only if
/// it saw the same key before and after.
struct MrEntry {
  std::atomic<uint32_t> key{0};  // 0: free
  std::atomic<uint64_t> addr{0};
  std::atomic<uint64_t> length{0};
  std::atomic<uint32_t> access{0};
  std::atomic<uint32_t> pd_id{0};
  uint32_t last_key = 0;  // under mr_mu_: the entry's previous key, which its next one must differ from
};

/// A consistent copy of a registered region.
struct MrView {
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t access = 0;
  uint32_t pd_id = 0;
};

/// Whether [va, va + len) lies inside the region and does not wrap.
inline bool covers(const MrView& mr, uint64_t va, uint64_t len) {
  return va >= mr.addr && va + len <= mr.addr + mr.length && va + len >= va;
}

/// Bits set by posting threads, taken by one consumer: two levels, so that taking them costs one
/// look per 4096 QPs plus one per word with a bit, not one per 64 QPs.
class PostedBits {
 public:
  explicit PostedBits(uint32_t bits) : words_((bits + 63) / 64), summary_((words_.size() + 63) / 64) {}
  /// Any thread (after its post's release store).
  void set(uint32_t i) {
    words_[i / 64].fetch_or(uint64_t{1} << (i % 64), std::memory_order_acq_rel);
    const uint32_t w = i / 64;
    summary_[w / 64].fetch_or(uint64_t{1} << (w % 64), std::memory_order_acq_rel);
  }
  /// The consumer: calls fn(i) for every bit set since the last call, clearing it.
  template <class Fn>
  void take(Fn&& fn) {
    for (uint32_t s = 0; s < summary_.size(); ++s) {
      // A plain load first: most words are 0 on most passes, and the exchange would take the line.
      if (summary_[s].load(std::memory_order_relaxed) == 0) continue;
      // The summary bit is cleared before the words it covers are read: a post that sets a word's
      // bit after that read sets the summary bit again.
      for (uint64_t ws = summary_[s].exchange(0, std::memory_order_acq_rel); ws != 0; ws &= ws - 1) {
        const uint32_t w = s * 64 + static_cast<uint32_t>(std::countr_zero(ws));
        for (uint64_t bits = words_[w].exchange(0, std::memory_order_acq_rel); bits != 0; bits &= bits - 1) {
          fn(w * 64 + static_cast<uint32_t>(std::countr_zero(bits)));
        }
      }
    }
  }

 private:
  std::vector<std::atomic<uint64_t>> words_;
  std::vector<std::atomic<uint64_t>> summary_;
};

class Nic;

/// One datapath thread of a NIC: its QPs (table index ≡ its number modulo the datapath count), its
/// port queue, timing wheel, DCQCN state and counters.
class Datapath {
 public:
  Datapath(Nic& nic, uint32_t index, PortQueue& queue);
  ~Datapath();
  Datapath(const Datapath&) = delete;
  Datapath& operator=(const Datapath&) = delete;

  /// Starts the thread (after every datapath of the NIC exists).
  void start();
  /// Stops and joins it.
  void stop();

  uint32_t index() const { return index_; }
  /// Runs fn on the datapath thread and waits for it (control path only).
  void run(const std::function<void()>& fn) { commands_.run_sync(fn); }
  const base::Heartbeat& heartbeat() const { return pass_state_; }
  /// Tells a sleeping datapath that new work was posted.
  void doorbell();
  /// Same, for work posted to the QP in this slot: the next pass gives it a transmit turn.
  void doorbell_slot(uint32_t slot) {
    posted_.set(slot);
    doorbell();
  }
  /// Waits for the pass in progress, if one is.
  void wait_pass() const;
  /// Adds this datapath's counters to `c` (any thread, without waiting for it).
  void add_counters(NicCounters& c) const;

  // ---- datapath-thread only (reached through run()) ----
  Result<QpContext*> add_qp(uint32_t index, uint32_t qpn, uint32_t pd_id, std::shared_ptr<QpShared> shared,
                            std::shared_ptr<CqShared> scq, std::shared_ptr<CqShared> rcq);
  void remove_qp(uint32_t qpn);
  Status modify_qp(uint32_t qpn, const QpAttr& attr, uint32_t mask);
  QpAttr query_qp(uint32_t qpn);
  /// Appends the reaction-point state of every QP in RTS, brought up to the current loop pass.
  void dcqcn_samples(std::vector<DcqcnSample>& out);
  /// Rebuilds the reaction and notification points from new parameters; per-QP state is kept.
  void set_dcqcn_params(const cc::DcqcnParams& params);
  /// Loop passes run, and QP visits (transmit turns and timers handled) they made: a pass costs
  /// O(QPs with work), and these show it.
  PassStats pass_stats() const { return {passes_, qps_visited_, wheel_.size()}; }

 private:
  void loop();
  Status modify_state(QpContext& qp, const QpAttr& attr, uint32_t mask);
  void idle_wait(TimeNs now, TimeNs next_deadline, uint64_t seen_seq);

  // receive side (datapath_rx.cc)
  bool rx_burst(TimeNs now);
  void on_packet(const roce::Packet& pkt, const roce::IpUdpInfo& ip, TimeNs now);
  /// Whether a packet with these IP/UDP headers comes from the QP's peer or the NIC's relay.
  bool from_peer(const QpContext& qp, const roce::IpUdpInfo& ip) const {
    // A peer sends from RoCEv2 source ports, or from its listening port (source_ports = 0).
    if (ip.src == qp.ip.dst && (ip.src_port >= kSourcePortMin || ip.src_port == qp.ip.dst_port)) return true;
    return relay_port_ != 0 && ip.src_port == relay_port_ && ip.src == relay_ip_;
  }
  void drop(RxDropReason reason, uint64_t n = 1) { counters_.rx_dropped_by_reason[static_cast<size_t>(reason)] += n; }
  // requester (requester.cc)
  void accept_new_wrs(QpContext& qp);
  bool requester_tx(QpContext& qp, TimeNs now, int budget);
  void on_ack(QpContext& qp, const roce::Packet& pkt, TimeNs now);
  void on_read_response(QpContext& qp, const roce::Packet& pkt, TimeNs now);
  void advance_una(QpContext& qp, uint32_t psn, TimeNs now);
  uint32_t past_received_reads(QpContext& qp, uint32_t psn);
  void complete_sends(QpContext& qp);
  void go_back_n(QpContext& qp, uint32_t psn);
  void retransmit_timer(QpContext& qp, TimeNs now);
  void fail_head(QpContext& qp, WcStatus status);
  // responder (responder.cc)
  void on_request(QpContext& qp, const roce::Packet& pkt, TimeNs now);
  bool responder_tx(QpContext& qp, TimeNs now, int budget);
  void push_response(QpContext& qp, const Response& r);
  void ack_coalesced(QpContext& qp, uint32_t psn);
  bool check_remote(const QpContext& qp, uint64_t va, uint32_t len, uint32_t rkey, uint32_t access) const;
  // congestion control (datapath_cc.cc)
  bool may_send_data(const QpContext& qp, TimeNs now) const;
  void on_data_sent(QpContext& qp, TimeNs now, size_t bytes);
  void on_ce_marked(QpContext& qp, TimeNs now);
  void on_cnp(QpContext& qp, TimeNs now);
  void reaction_timer(QpContext& qp, TimeNs now);
  void notification_timer(QpContext& qp, TimeNs now);
  /// Brings the departure the pacer holds back forward to a rate the reaction point raised.
  void repace(QpContext& qp, TimeNs now);
  // scheduling (datapath_timers.cc): which QPs a pass visits
  /// Puts the QP on active_ (no-op if it is there).
  void activate(QpContext& qp);
  /// Schedules one of the QP's timers at `due` unless it is already due no later; kNever: no-op.
  void arm(QpContext& qp, QpTimer timer, TimeNs due);
  /// Unschedules one of the QP's timers (no-op if it is not scheduled).
  void disarm(QpContext& qp, QpTimer timer);
  void cancel_timers(QpContext& qp);
  /// Activates the QPs posted to since the last call (doorbell_slot).
  void collect_posted();
  /// Runs the wheel's timers due by `now`.
  void fire_timers(TimeNs now);
  /// The transmit rounds of a pass over active_; true if anything was sent. `drained`: the last
  /// round sent nothing.
  bool transmit(TimeNs now, bool* drained);
  /// Takes a QP that sent nothing off active_, arming what will bring it back.
  void park(QpContext& qp, TimeNs now);
  /// A modify: the QP gets a pass and its retransmit timer a look (state or timeout may have changed).
  void after_modify(QpContext& qp);
  // common (datapath_qp.cc)
  bool check_local(const QpContext& qp, const Sge& sge, bool need_write) const;
  void set_error(QpContext& qp);
  void flush(QpContext& qp);
  void close_path(QpContext& qp);
  /// Releases the oldest send WR, and the payload CRCs computed for it at post.
  static void release_send(QpShared& s);
  bool push_completion(CqShared& cq, const WorkCompletion& wc);
  /// The QP with this number if this datapath owns it.
  QpContext* qp_by_num(uint32_t qpn);
  /// Queues one packet for sending (flushes the batch when full). `payload_crc`, when given, is
  /// crc32_update(0, pkt.payload) of a full path-MTU payload, computed at post.
  void send_packet(const QpContext& qp, const roce::Packet& pkt, uint8_t tos, const uint32_t* payload_crc = nullptr);
  void send_cnp(const QpContext& qp);
  void flush_tx();

  Nic& nic_;
  const uint32_t index_;
  PortQueue& queue_;
  const bool payload_in_place_;
  const bool cc_enabled_;
  cc::DcqcnParams dcqcn_;  // this thread's copy (set_dcqcn_params)
  roce::IpAddr relay_ip_;     // EngineConfig::relay_address
  uint16_t relay_port_ = 0;   // 0: no relay
  int event_fd_ = -1;
  // The time the current loop pass runs at. Commands use it rather than the clock: the pass goes on
  // with this `now` after draining them, and a reaction-point state must not see time go backwards.
  TimeNs loop_now_ = 0;
  uint64_t completions_pushed_ = 0;  // completion_spin_us: a pass that completed work spins after it
  cc::ReactionPoint rp_;
  cc::NotificationPoint np_;
  cc::Pacer pacer_;
  roce::DecodeCounters decode_counters_;
  LiveCounters counters_;
  std::array<RxPacket, kRxBurst> rx_;

  // This datapath's QPs by slot (table index / datapath count).
  std::vector<std::unique_ptr<QpContext>> qps_;
  // QPs a pass gives a transmit turn: posted to, received a packet, woken by a timer, or still
  // sending. Everything else waits on the wheel, so a pass costs O(QPs with work), not O(QPs).
  std::vector<QpContext*> active_;
  cc::TimingWheel wheel_;  // every QP's timers (QpTimer); sized at QP creation
  PostedBits posted_;      // one bit per slot, set by posting threads (doorbell_slot)
  uint64_t passes_ = 0;
  uint64_t qps_visited_ = 0;
  // The pass: passes_ * 2, plus 1 while a pass runs (it may touch registered memory then); even
  // while the datapath sleeps or has stopped. Nic::remove_mr waits on it.
  base::Heartbeat pass_state_;
  // Combines a full segment's CRC into an ICRC, per path MTU (256 << index); built on first RTR.
  std::array<std::unique_ptr<roce::Crc32Shift>, 5> mtu_shifts_;

  base::CommandQueue commands_{64, [this] { doorbell(); }};  // run(): control threads -> datapath
  std::atomic<bool> stop_{false};
  std::atomic<bool> sleeping_{false};
  std::atomic<uint64_t> doorbell_seq_{0};
  std::thread thread_;
};

/// The NIC: its port, its datapaths, and what they share — the region table, the QP numbers.
class Nic {
 public:
  /// Opens the port and starts the datapath threads; throws on setup failure (startup only).
  Nic(const EngineConfig& config, const PortFactory& make_port);
  ~Nic();
  Nic(const Nic&) = delete;
  Nic& operator=(const Nic&) = delete;

  uint32_t id() const { return id_; }
  const EngineConfig& config() const { return config_; }
  PacketPort& port() const { return *port_; }
  const QpNumbering& numbering() const { return numbering_; }
  uint32_t datapath_count() const { return config_.datapath_threads; }
  Datapath& datapath(uint32_t i) const { return *datapaths_[i]; }
  /// The datapath that owns the QP with this number, and the QP's slot there.
  Datapath& datapath_of(uint32_t qpn) const { return *datapaths_[numbering_.index(qpn) % datapath_count()]; }
  uint32_t slot_of(uint32_t qpn) const { return numbering_.index(qpn) / datapath_count(); }
  /// Runs fn on every datapath in turn (control path).
  void run_all(const std::function<void(Datapath&)>& fn);

  // ---- QP numbers (control threads) ----
  /// Reserves a table entry on the least loaded datapath and a fresh QP number for it.
  Result<uint32_t> reserve_qpn();
  /// Gives a reserved or used entry back.
  void release_qpn(uint32_t qpn);

  // ---- posting threads ----
  /// Computes the payload CRCs of `wr`, about to be pushed to `s.sq` (the send queue has room),
  /// into `s.crc_ring` and describes them in `*pc`; leaves `*pc` empty when the WR does not qualify
  /// (crc_at_post off, READ, shorter than kCrcAtPostMinBytes, ring full, key or bounds wrong).
  void crc_at_post(QpShared& s, const SendWr& wr, PostCrc* pc);

  // ---- registering threads (any thread; neither wakes nor waits for an idle datapath) ----
  /// Fills a free memory-region table entry: the datapaths see it from their next key lookup.
  Status add_mr(void* addr, size_t length, uint32_t access, uint32_t pd_id, uint32_t* key);
  /// Empties the entry, then waits until neither a datapath nor a posting thread can still be
  /// touching the region's memory for a key lookup made before: the caller may unmap it then. The
  /// wait is for each datapath's pass in progress, if one is (never when it sleeps), and for posts
  /// computing CRCs (crc_at_post) at that moment.
  void remove_mr(uint32_t key);
  /// A copy of the region with this key, if registered. Any thread may call it (seqlock read).
  bool find_mr(uint32_t key, MrView* out) const;
  /// Waits until none of `qps` is still reading application memory for a post that began before
  /// the call.
  static void wait_posts(const std::vector<std::shared_ptr<QpShared>>& qps);
  /// Keeps every QP's shared state for remove_mr's wait on posting threads.
  void add_poster(std::shared_ptr<QpShared> s);
  void remove_poster(const std::shared_ptr<QpShared>& s);

  /// The counters of every datapath, summed, from any thread without waiting for them; the CPU time
  /// is the datapath threads' clocks.
  NicCounters counters() const;
  std::vector<const base::Heartbeat*> heartbeats() const;
  /// The DCQCN parameters in force (control path).
  cc::DcqcnParams dcqcn_params() const;
  void set_dcqcn_params(const cc::DcqcnParams& params);

 private:
  const EngineConfig config_;  // as opened (config_.dcqcn: the parameters at open)
  mutable std::mutex dcqcn_mu_;
  cc::DcqcnParams dcqcn_;  // in force now
  uint32_t id_;
  QpNumbering numbering_;
  std::unique_ptr<PacketPort> port_;
  std::vector<std::unique_ptr<Datapath>> datapaths_;

  std::unique_ptr<MrEntry[]> mrs_;  // kMaxMrs entries
  std::mutex mr_mu_;                // registering threads: filling and emptying mrs_
  mutable std::mutex posters_mu_;
  std::vector<std::shared_ptr<QpShared>> posters_;

  mutable std::mutex qpn_mu_;        // control threads: QP numbers
  std::vector<uint32_t> qpn_;        // per table entry: its QP number now, 0 when free
  std::vector<uint32_t> last_qpn_;   // per table entry: its previous QPN, which the next must differ from
  std::vector<uint32_t> qps_on_;     // QPs per datapath
};

}  // namespace rdmad::verbs::engine
