// The flow engine: one datapath thread that consumes every flow's submission ring, splits each
// request into chunks, posts them on the NIC the peer's balancer picks (on one of that lane's
// qps_per_lane QPs), polls the NICs' completion queues, fails lanes over, and writes completions
// back in submission order. The control thread
// (FlowService) changes its state only through run_sync(), so everything here is single-threaded.
#pragma once

#include <poll.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "rdmad/balancer/balancer.h"
#include "rdmad/base/command_queue.h"
#include "rdmad/base/heartbeat.h"
#include "rdmad/flow_ring.h"
#include "rdmad/daemon/clients/region_pins.h"
#include "rdmad/daemon/peer/qp_connector.h"
#include "rdmad/daemon/peer/wire.h"
#include "rdmad/verbs/device.h"

namespace prometheus {
class Histogram;
}

namespace rdmad::flow {

using Token = std::array<uint8_t, 16>;

/// One NIC's keys of a remote range the peer holds as several MRs (peer::GrantKey): slice k covers
/// [k·slice_bytes, (k+1)·slice_bytes) of the range.
struct RemoteSlices {
  uint64_t slice_bytes = 0;
  std::vector<uint32_t> rkeys;  // every slice's, slice 0 first; empty: one MR (rkeys[] of the range)
};

/// Remote memory a client may use: a grant from the peer (import) or a posted receive (credit).
struct RemoteRange {
  uint64_t iova = 0;
  uint64_t length = 0;
  uint32_t rights = 0;  // RDMAD_ACCESS_REMOTE_WRITE / _READ
  std::array<uint32_t, proto::kMaxNics> rkeys{};  // slice 0's where the NIC's MR is sliced
  std::array<bool, proto::kMaxNics> has_key{};
  // By NIC, for ranges some NIC holds in slices; null for the usual one MR per NIC (copying a
  // range into a transfer then allocates nothing).
  std::shared_ptr<const std::vector<RemoteSlices>> slices;
  Token token{};
  uint64_t recv_id = 0;  // credits: the peer's receive
  // An import whose grant went with the peer's last session (it restarted, or the connection
  // dropped): no keys; requests fail with RDMAD_ERR_PEER until the peer grants the token again
  // (the import then gets its keys, same remote handle), RDMAD_ERR_NOT_FOUND once the peer has
  // been back for kRegrantGraceUs without granting it.
  bool awaiting_grant = false;
};

/// How long after a peer's session is back its flows' imports wait for their grants.
inline constexpr uint64_t kRegrantGraceUs = 5'000'000;

/// Fills the keys of `range` from the ones a grant or receive post carries (NICs beyond kMaxNics
/// are ignored).
void set_remote_keys(RemoteRange& range, std::span<const peer::GrantKey> keys);

/// One work request's part of an access to a remote range: `length` bytes at `offset` of the
/// range, with the rkey of the slice they are in.
struct RemotePiece {
  uint64_t offset = 0;
  uint32_t length = 0;
  uint32_t rkey = 0;
};
/// A chunk (at most 1 GiB) crosses at most one boundary of real slices (3.5 GiB, rdma_core); a peer
/// whose slices are so small that a chunk crosses more than three has its accesses refused.
inline constexpr size_t kMaxRemotePieces = 4;

/// Cuts `length` bytes at `offset` of `range` into pieces that each lie in one of NIC `nic`'s
/// slices (one piece where the NIC has one MR); returns how many were written to `out`, 0 when
/// the bytes leave the range or the NIC has no key.
size_t remote_pieces(const RemoteRange& range, uint16_t nic, uint64_t offset, uint32_t length,
                     std::span<RemotePiece, kMaxRemotePieces> out);

/// Counters per local NIC, read at scrape time from another thread.
struct LaneCounters {
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> chunks_sent{0};
  std::atomic<uint64_t> failovers{0};
  // Path checks of recovering lanes before they rejoin (flow_mailbox.cc), by result.
  std::atomic<uint64_t> rejoin_checks_ok{0};
  std::atomic<uint64_t> rejoin_checks_failed{0};
  std::atomic<double> weight{0};  // share of chunks under the current weights, averaged over peers
  // Chunks posted on the j-th QP of this NIC's lanes (all peers): [flow] qps_per_lane spreads them.
  std::array<std::atomic<uint64_t>, peer::kMaxQpsPerNic> qp_chunks_sent{};
  std::atomic<uint32_t> lane_qps{0};  // QPs of this NIC's lanes that are up: the most of any peer's
};

struct EngineCounters {
  std::atomic<uint64_t> flows_open{0};
  std::atomic<uint64_t> transfers_in_flight{0};
  std::atomic<uint64_t> transfers_completed{0};
  std::atomic<uint64_t> transfers_failed{0};
  std::atomic<uint64_t> flow_errors{0};  // flows failed for breaking the ring protocol
  std::atomic<uint64_t> credits_refused{0};  // receive credits beyond max_receives_per_peer
  std::atomic<uint64_t> pinned_spills{0};    // times a pinned flow left its NICs (all of them down)
  // Send-dones this node sent, by way (flow_mailbox.cc): as SENDs on a lane, or on the control
  // channel (no lane up, a lane's mailbox full, or again after the lane holding it failed).
  std::atomic<uint64_t> dones_on_lanes{0};
  std::atomic<uint64_t> dones_on_control{0};
  std::atomic<uint64_t> dones_refused{0};  // malformed mail a peer sent into our mailboxes
  // Receive advertisements this node sent, by way (as for send-dones), and the peers' that came a
  // second time (sent again after a lane failed holding them) and were dropped.
  std::atomic<uint64_t> posts_on_lanes{0};
  std::atomic<uint64_t> posts_on_control{0};
  std::atomic<uint64_t> posts_duplicate{0};
  std::atomic<uint64_t> posts_withdrawn{0};  // the peers' receives withdrawn unfilled (RecvCancel)
  // Sends whose WRITE with immediate completed the peer's receive (no send-done needed), and the
  // answers to our RecvQuery about those whose lane failed first, by peer::RecvStateKind.
  std::atomic<uint64_t> sends_by_immediate{0};
  std::array<std::atomic<uint64_t>, 3> imm_answers{};
};

/// The balancer's and the peer protocol's names for why a lane went down.
inline peer::RebuildCause rebuild_cause(balancer::Balancer::Fault f) {
  return f == balancer::Balancer::Fault::kRequest ? peer::RebuildCause::kRequestRefused
                                                  : peer::RebuildCause::kPathFault;
}
inline balancer::Balancer::Fault lane_fault(peer::RebuildCause c) {
  return c == peer::RebuildCause::kRequestRefused ? balancer::Balancer::Fault::kRequest
                                                  : balancer::Balancer::Fault::kPath;
}

/// What the engine asks of the control thread (each call is posted there, never run inline).
struct ControlHooks {
  /// Lane mail no lane could take (or a send-done sent again): its control-channel frame.
  std::function<void(const std::string& peer, const peer::Mail&)> mail;
  /// A send's WRITE with immediate lost its lane unacknowledged: ask the peer about the receive.
  std::function<void(const std::string& peer, const peer::RecvQuery&)> recv_query;
  /// A lane failed: its QPs are to be rebuilt, and the peer told why (`cause`).
  std::function<void(const std::string& peer, uint16_t nic, const std::string& reason, peer::RebuildCause cause)>
      lane_failed;
  std::function<void()> reap_registrations;
};

struct EngineOptions {
  balancer::BalancerConfig balancer;
  uint32_t lane_window_chunks = 8;
  // Receives advertised to one peer and not yet filled, and receive credits one peer may hold
  // here: the same bound on both sides, so only a misbehaving peer ever goes beyond it.
  uint32_t max_receives_per_peer = 4096;
};

class PeerDomain;

/// A flow as the engine sees it. The ring memory and fds belong to FlowService.
struct FlowSetup {
  uint64_t id = 0;
  uint64_t conn_id = 0;
  std::string peer;
  uint64_t channel = 0;
  // The uid of the client that opened it: its sends and receives pair only with the peer's flows
  // of the same uid and channel.
  uint32_t owner_uid = 0;
  void* ring = nullptr;
  uint32_t sq_depth = 0;
  uint32_t cq_depth = 0;
  int doorbell_fd = -1;
  int completion_fd = -1;
  // The NICs (lanes) its chunks go on while one of them is up (the client's nic_mask); every
  // NIC when 0.
  balancer::LaneMask nic_mask = balancer::kEveryLane;
};

class FlowEngine {
 public:
  FlowEngine(EngineOptions options, std::vector<std::string> nic_names, std::vector<verbs::CompletionQueue*> cqs,
             clients::RegionPins& registrations, ControlHooks hooks, prometheus::Histogram* duration);
  ~FlowEngine();
  FlowEngine(const FlowEngine&) = delete;
  FlowEngine& operator=(const FlowEngine&) = delete;

  void start();
  void stop();
  /// Runs `f` on the engine thread and waits for it (inline when the thread is not running).
  void run_sync(const std::function<void()>& f);
  // The engine thread's heartbeat (a pass per loop turn, idle while it sleeps): the watchdog reads it.
  const base::Heartbeat& heartbeat() const { return heartbeat_; }

  // Engine-thread operations (call through run_sync).
  void add_flow(const FlowSetup& setup);
  void remove_flow(uint64_t flow_id);
  void add_import(uint64_t flow_id, uint64_t remote_handle, const RemoteRange& range);
  void drop_token(const Token& token);
  /// Drops the flow's imports that still await their grants.
  void prune_awaiting(uint64_t flow_id);
  /// A peer's QPs are up: per local NIC, its lane's QPs (QpConnector::nic_qps; empty: that NIC
  /// has none), in `domain`'s protection domains, where the engine registers what the peer's flows
  /// use (valid until peer_lost).
  /// `session`: the number both nodes know this session by (PeerSession::session_of).
  void peer_ready(const std::string& peer, const std::vector<std::vector<verbs::QueuePair*>>& qps,
                  const PeerDomain* domain, uint32_t session);
  /// The peer's connection is gone: the flows' imports of its grants lose their keys and await
  /// the grants of its next session (RemoteRange::awaiting_grant).
  void await_grants(const std::string& peer);
  /// A peer was lost: its transfers fail, its flows wait for it again. Its QPs go right after.
  void peer_lost(const std::string& peer);
  /// The QPs of one lane are about to be destroyed (rebuild): stop using them. When the peer started
  /// the rebuild, `cause` is its verdict: after a path fault the lane fails over here too (counted,
  /// back-off), after a refused request it rejoins as soon as it is rebuilt.
  void lane_replacing(const std::string& peer, uint16_t nic, peer::RebuildCause cause);
  /// The lane has fresh QPs in RTS (QpConnector::nic_qps): it rejoins after its back-off.
  void lane_rebuilt(const std::string& peer, uint16_t nic, const std::vector<verbs::QueuePair*>& qps);
  /// A NIC's port went down: its lane to every peer fails over.
  void nic_down(uint16_t nic, const std::string& reason);
  /// One of a NIC's QPs failed (an asynchronous QP fatal event): the lane it carries fails over.
  void qp_failed(uint16_t nic, uint32_t qp_num);
  /// A NIC came into service: the completion queue its QPs use from now on.
  void set_cq(uint16_t nic, verbs::CompletionQueue* cq);
  /// congestion_aware inputs of one NIC, for every peer's balancer.
  void set_congestion(uint16_t nic, double cnp_per_s, double rate_mbps);
  /// Lane mail the peer sent on the control channel (from a lane: take_mail directly).
  void mail(const std::string& peer, peer::Mail m);
  /// Completes the receive `done` names if it is ours, pending, advertised to `peer` on that
  /// channel (true); anything else completes nothing (false).
  bool send_done(const std::string& peer, const peer::SendDone& done);
  /// The peer asks whether its WRITE with immediate into `q.recv_id` was placed: stops the lane's
  /// QPs, takes the completions they left, and answers.
  peer::RecvState recv_query(const std::string& peer, const peer::RecvQuery& q);
  /// The peer's answer about one of our sends (recv_query on its side).
  void recv_state(const std::string& peer, const peer::RecvState& state);

  const EngineCounters& counters() const { return counters_; }
  const LaneCounters& lane(size_t nic) const { return *lane_counters_[nic]; }
  size_t nic_count() const { return nic_names_.size(); }
  const std::string& nic_name(size_t nic) const { return nic_names_[nic]; }

  struct Flow;
  struct Peer;
  struct Transfer;

 private:
  void loop();
  void wake();
  bool poll_flows();
  bool poll_cqs();
  bool plan_and_post(Peer& p);
  void sleep_until_work(bool in_flight);
  uint64_t now_us() const;
  void publish_weights();
  // LaneCounters::lane_qps of one NIC, whenever a lane of it comes up or goes down.
  void publish_lane_qps(uint16_t nic);

  // Requests (flow_submit.cc).
  void take_request(Flow& f, const ring::Sqe& sqe);
  void start_send(Peer& p, Transfer* t);
  // A receive the peer advertised, however it came: taken in number order, once.
  void take_post(Peer& p, peer::RecvPost post);
  // One in its turn: a credit for the flows' sends of its channel.
  void add_credit(Peer& p, const peer::RecvPost& post);
  void refuse_credit(const Peer& p, const char* reason);
  // A withdrawn receive of the peer's: its credit dropped, or its number consumed without one.
  void take_cancel(Peer& p, const peer::RecvCancel& cancel);
  // Takes the held advertisements whose turn it is.
  void drain_posts(Peer& p);
  // Holds one that came before its turn (keys empty: withdrawn), within max_receives_per_peer.
  void hold_early(Peer& p, peer::RecvPost post);
  void fail_flow(Flow& f, const char* why);
  void complete_now(Flow& f, const ring::Sqe& sqe, rdmad_status status, uint64_t length);

  // Chunks and completions (flow_chunks.cc).
  bool post_chunk(Peer& p, const balancer::Chunk& c);
  void on_completion(uint16_t nic, const verbs::WorkCompletion& wc);
  void chunk_finished(Transfer* t, rdmad_status status);
  // A chunk that will not be sent (its request failed, or the peer has no key on its NIC): freed
  // in the balancer without a throughput sample and accounted to its transfer as `status`.
  void finish_unsent(Peer& p, const balancer::Chunk& c, Transfer* t, rdmad_status status);
  void lane_failed(Peer& p, uint16_t nic, const std::string& reason,
                   balancer::Balancer::Fault fault = balancer::Balancer::Fault::kPath);
  // Takes the QPs of a lane that just failed to the error state (flushing what they hold).
  void stop_lane_qps(Peer& p, uint16_t nic);
  // Moved chunks back into the balancer: `failed_nic` is the lane they were on (kNoNic: orphans).
  void requeue(Peer& p, std::vector<balancer::Chunk>& moved, uint16_t failed_nic);
  // A chunk of `t` got lane `nic`: notes a pinned flow leaving its lanes (counted, logged) or
  // coming back to them.
  void note_lane(const Peer& p, const Transfer* t, uint16_t nic);
  void progress(Flow& f);
  void finish(Flow& f, Transfer* t);
  void fail_peer_transfers(Peer& p, rdmad_status status);
  void write_cqe(Flow& f, const ring::Cqe& cqe);

  // Mail on the lanes (flow_mailbox.cc).
  // Registers a lane's mailbox and posts its receives; false (and the lane failed) when it cannot.
  bool open_mailbox(Peer& p, uint16_t nic);
  bool post_inbox(Peer& p, uint16_t nic, uint8_t qp, uint16_t slot);
  // On a lane of `prefer` (the flow's NICs; kEveryLane: any) if one can take it, else on any lane;
  // false when none can (or it is longer than a mailbox slot).
  bool mail_on_lane(Peer& p, const peer::Mail& mail, balancer::LaneMask prefer);
  // On a lane when one can take it, else on the control channel.
  void send_done_to(Peer& p, const peer::SendDone& done, balancer::LaneMask prefer);
  void send_done_on_control(Peer& p, const peer::SendDone& done);
  // Lane mail on a lane when one can take it, else its control-channel message.
  void send_mail(Peer& p, const peer::Mail& mail, balancer::LaneMask prefer);
  // The mail a failing lane holds unacknowledged goes again: send-dones on the control channel,
  // advertisements and cancels on another lane or the control channel.
  void resend_lane_mail(Peer& p, uint16_t nic);
  void on_mail_completion(uint16_t nic, const verbs::WorkCompletion& wc);
  // A recovering lane's path, checked before it rejoins: a zero-length RDMA WRITE on each of its
  // QPs (acknowledged by the peer's NIC, no memory touched); the lane rejoins when every one
  // completed, and fails again (rebuilt, a longer back-off) when one does not.
  void check_path(Peer& p, uint16_t nic);
  void path_check_completed(Peer& p, uint16_t nic, uint8_t epoch, uint8_t qp, const verbs::WorkCompletion& wc);
  // Lane mail from the peer, by whichever way it came.
  void take_mail(Peer& p, peer::Mail m);
  // Something a peer put in our mailbox on lane `nic` completed nothing: counted, logged (limited).
  void mail_refused(const Peer& p, uint16_t nic, const std::string& reason);

  // Sends by WRITE with immediate (flow_immediate.cc).
  // Whether the chunk of `t` about to be posted in `pieces` work requests carries the immediate.
  bool use_immediate(const Transfer* t, size_t pieces) const;
  // A receive of ours the peer's WRITE with immediate completed (on the lane of `nic`).
  void placed_by_immediate(Peer& p, uint16_t nic, const verbs::WorkCompletion& wc);
  // `t`'s WRITE with immediate was on lane `nic` when it failed: held until the peer says whether
  // it was placed.
  void ask_about(Peer& p, Transfer* t, uint16_t nic);

  Transfer* alloc_transfer();
  void free_transfer(Transfer* t);
  Transfer* transfer_by_recv_id(uint64_t recv_id);
  Peer* find_peer(const std::string& name);

  EngineOptions options_;
  std::vector<std::string> nic_names_;
  std::vector<verbs::CompletionQueue*> cqs_;  // nullptr: the NIC is out of service
  clients::RegionPins& registrations_;
  ControlHooks hooks_;
  prometheus::Histogram* duration_;
  EngineCounters counters_;
  std::vector<std::unique_ptr<LaneCounters>> lane_counters_;

  std::map<uint64_t, std::unique_ptr<Flow>> flows_;
  std::vector<std::unique_ptr<Peer>> peers_;  // slot = index, reused
  std::vector<std::unique_ptr<Transfer>> transfers_;
  std::vector<uint32_t> free_transfers_;
  uint64_t in_flight_ = 0;  // transfers taken and not yet completed
  // Mail on the lanes not yet acknowledged: the loop watches the CQs for it as for transfers in
  // flight (a lane that fails holding some sends it again another way).
  uint64_t mail_unacked_ = 0;

  // Commands from the control thread.
  std::thread thread_;
  std::atomic<bool> running_{false};
  base::Heartbeat heartbeat_;
  uint64_t passes_ = 0;  // loop turns (engine thread)
  int wake_fd_ = -1;
  // Commands from the control thread (run_sync); the engine drains it every pass.
  base::CommandQueue commands_{64, [this] { wake(); }};
  std::vector<verbs::WorkCompletion> wc_buf_;
  std::vector<balancer::Chunk> chunk_buf_;
  uint16_t next_peer_gen_ = 1;
  uint64_t last_weights_us_ = 0;
  uint32_t idle_sleeps_ = 0;       // in-flight sleeps since the last progress
  std::vector<struct pollfd> pollfds_;  // reused by sleep_until_work
  std::vector<uint16_t> notify_cqs_;    // the CQ of pollfds_[1 + i], armed by sleep_until_work
};

}  // namespace rdmad::flow
