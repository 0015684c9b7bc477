// Chunks on the wire: planning through the peer's balancer, posting within each lane's window,
// completions, failover (a failed lane's chunks go to the others) and in-order completion.
#include <prometheus/histogram.h>
#include <spdlog/spdlog.h>

#include "engine_state.h"
#include "rdmad/base/log_fields.h"
#include "rdmad/base/log_limiter.h"
#include "rdmad/base/trace_points.h"

namespace rdmad::flow {
namespace {

rdmad_status wc_to_status(verbs::WcStatus s) {
  switch (s) {
    case verbs::WcStatus::kSuccess: return RDMAD_OK;
    case verbs::WcStatus::kRemoteAccessError: return RDMAD_ERR_REMOTE_ACCESS;
    case verbs::WcStatus::kLocalProtectionError:
    case verbs::WcStatus::kLocalLengthError: return RDMAD_ERR_INVALID_ARGUMENT;
    default: return RDMAD_ERR_PEER;
  }
}

// Chunks a lane may hold beyond its window before planning pauses.
constexpr size_t kMaxBacklog = 2;

base::LogLimiter g_spill_log;  // pinned flows leaving their NICs and coming back
base::LogLimiter g_rejoin_log;  // lanes failing again before they rejoined (a path still broken)

}  // namespace

bool request_error(verbs::WcStatus s) {
  return s == verbs::WcStatus::kRemoteAccessError || s == verbs::WcStatus::kLocalProtectionError ||
         s == verbs::WcStatus::kLocalLengthError || s == verbs::WcStatus::kRemoteInvalidRequest;
}

bool FlowEngine::plan_and_post(Peer& p) {
  bool progress = false;
  const uint32_t window = options_.lane_window_chunks;
  // Backlogs first (chunks already assigned to a lane).
  size_t fullest = 0;
  for (uint16_t i = 0; i < p.lanes.size(); ++i) {
    auto& lane = p.lanes[i];
    while (!lane.dead && !lane.backlog.empty() && lane.posted < window) {
      balancer::Chunk c = lane.backlog.front();
      lane.backlog.pop_front();
      if (!post_chunk(p, c)) {
        lane.backlog.push_front(c);
        break;
      }
      progress = true;
    }
    fullest = std::max(fullest, lane.backlog.size());
  }
  if (!p.orphans.empty()) {
    std::vector<balancer::Chunk> again;
    again.swap(p.orphans);
    requeue(p, again, balancer::kNoNic);
  }
  // New chunks only while no lane has more than kMaxBacklog waiting: a slow lane then holds
  // planning back instead of collecting more than its share (the balancer's weights decide the
  // split), yet one probe chunk stuck behind a slow lane does not idle the others.
  const uint64_t now = now_us();
  while (fullest < kMaxBacklog && !p.planning.empty()) {
    Transfer* t = p.planning.front();
    if (t->chunks_planned >= t->chunks_total) {
      p.planning.pop_front();
      continue;
    }
    const uint64_t chunk = options_.balancer.chunk_bytes;
    const uint64_t offset = uint64_t{t->chunks_planned} * chunk;
    balancer::Message m;
    m.tag = chunk_tag(t->slot, t->chunks_planned);
    m.flow_id = t->flow != nullptr ? t->flow->setup.id : 0;
    m.bytes = std::min<uint64_t>(chunk, t->sqe.length - offset);
    // Nearest NICs first (the balancer's PCI-distance rule): a far NIC striped with a near one
    // slows both down.
    m.distance = std::span<const balancer::PciDistance>(t->distance.data(), std::min(p.lanes.size(), t->distance.size()));
    m.lanes = t->lanes;
    chunk_buf_.clear();
    if (p.balancer->plan(m, now, chunk_buf_) != balancer::PlanStatus::kOk) break;
    const balancer::Chunk& c = chunk_buf_.front();
    note_lane(p, t, c.nic);
    p.chunks[c.id & kChunkSlotMask] = Peer::ChunkInfo{c.id, t, t->chunks_planned, 0};
    ++t->chunks_planned;
    progress = true;
    auto& lane = p.lanes[c.nic];
    if (lane.dead || lane.posted >= window || !post_chunk(p, c)) {
      lane.backlog.push_back(c);
      fullest = std::max(fullest, lane.backlog.size());
    }
  }
  return progress;
}

bool FlowEngine::post_chunk(Peer& p, const balancer::Chunk& c) {
  auto& info = p.chunks[c.id & kChunkSlotMask];
  Transfer* t = info.transfer;
  auto& lane = p.lanes[c.nic];
  if (t->status != RDMAD_OK) {
    // The request already failed (the peer refused a chunk of it): the rest would fail the same
    // way on any lane, and each failure would take a lane down. Account for it without sending.
    finish_unsent(p, c, t, t->status);
    return true;
  }
  const uint64_t offset = uint64_t{tag_index(c.tag)} * options_.balancer.chunk_bytes;
  const uint32_t lkey = t->lkeys[c.nic];  // 0 where the registration is not on this NIC: refused locally
  if (!t->remote.has_key[c.nic]) {
    // The remote memory is not registered on this lane's NIC: complete the chunk as failed.
    finish_unsent(p, c, t, RDMAD_ERR_REMOTE_ACCESS);
    return true;
  }
  // The rkey of the slice each byte is in: a chunk that crosses a slice of the peer's MRs goes as
  // one work request per slice, all with the chunk's id and only the last one signaled (RC
  // completes them in order; an error completes the failing one, signaled or not).
  const uint64_t remote_offset = (t->op == ring::Op::kSend ? 0 : t->sqe.remote_offset) + offset;
  std::array<RemotePiece, kMaxRemotePieces> pieces;
  const size_t n = remote_pieces(t->remote, c.nic, remote_offset, c.bytes, pieces);
  if (n == 0) {
    finish_unsent(p, c, t, RDMAD_ERR_REMOTE_ACCESS);  // checked at submit: a peer's keys that do not fit
    return true;
  }
  std::array<verbs::SendWr, kMaxRemotePieces> wrs;
  const bool imm = use_immediate(t, n);
  for (size_t i = 0; i < n; ++i) {
    verbs::SendWr& wr = wrs[i];
    wr.wr_id = make_wr_id(p.slot, lane.epoch, p.gen, c.id);
    wr.opcode = t->op == ring::Op::kRead ? verbs::WrOpcode::kRdmaRead : verbs::WrOpcode::kRdmaWrite;
    wr.sge.addr = t->local.iova + offset + (pieces[i].offset - remote_offset);
    wr.sge.length = pieces[i].length;
    wr.sge.lkey = lkey;
    wr.remote_addr = t->remote.iova + pieces[i].offset;
    wr.rkey = pieces[i].rkey;
    wr.signaled = i + 1 == n;
  }
  if (imm) {
    wrs[0].opcode = verbs::WrOpcode::kRdmaWriteWithImm;
    wrs[0].imm_data = make_imm(t->recv_id);
  }
  // The lane's chunks spread over its QPs (Lane::pick_qp); the pieces of one chunk stay on one QP
  // (only its last WR is signaled). Completions are matched to the QP by qp_num, to the chunk by id.
  const uint8_t j = lane.pick_qp();
  base::trace::mark(base::trace::Point::kChunkPosted);
  if (!lane.qps[j].qp->post_send({wrs.data(), n}).ok()) return false;
  t->imm = imm;
  ++lane.posted;
  ++lane.qps[j].posted;
  info.posted_us = now_us();
  LaneCounters& counters = *lane_counters_[c.nic];
  counters.qp_chunks_sent[j].fetch_add(1, std::memory_order_relaxed);
  counters.chunks_sent.fetch_add(1, std::memory_order_relaxed);
  counters.bytes_sent.fetch_add(c.bytes, std::memory_order_relaxed);
  return true;
}

bool FlowEngine::poll_cqs() {
  bool progress = false;
  for (uint16_t nic = 0; nic < cqs_.size(); ++nic) {
    if (cqs_[nic] == nullptr) continue;
    const size_t n = cqs_[nic]->poll(wc_buf_);
    for (size_t i = 0; i < n; ++i) on_completion(nic, wc_buf_[i]);
    progress |= n > 0;
  }
  return progress;
}

void FlowEngine::on_completion(uint16_t nic, const verbs::WorkCompletion& wc) {
  if (static_cast<uint8_t>(wc.wr_id >> 56) == kMailTag) {
    on_mail_completion(nic, wc);
    return;
  }
  const auto slot = static_cast<uint8_t>(wc.wr_id >> 56);
  const auto epoch = static_cast<uint8_t>(wc.wr_id >> 48);
  const auto gen = static_cast<uint32_t>(wc.wr_id >> 32) & 0xFFFF;
  const auto id = static_cast<balancer::ChunkId>(wc.wr_id);
  if (slot >= peers_.size() || !peers_[slot] || (peers_[slot]->gen & 0xFFFF) != gen) return;  // a lost peer's
  Peer& p = *peers_[slot];
  auto& lane = p.lanes[nic];
  // From a QP already given up (its chunks moved): ignored.
  if (lane.dead || epoch != lane.epoch) return;
  Peer::LaneQp* qp = lane.find_qp(wc.qp_num);
  if (qp == nullptr) return;
  --qp->posted;
  --lane.posted;
  auto& info = p.chunks[id & kChunkSlotMask];
  const bool known = info.id == id && info.transfer != nullptr;
  if (wc.status == verbs::WcStatus::kSuccess) {
    if (!known || !p.balancer->complete(id, now_us() - info.posted_us)) return;
    base::trace::mark(base::trace::Point::kChunkDone);
    Transfer* t = info.transfer;
    info.transfer = nullptr;
    chunk_finished(t, RDMAD_OK);
    return;
  }
  if (known && request_error(wc.status) && p.balancer->cancel(id)) {
    Transfer* t = info.transfer;
    info.transfer = nullptr;
    chunk_finished(t, wc_to_status(wc.status));
  }
  // The QP is in the error state now: everything else on the lane (on its other QPs too) moves to
  // the other lanes. A request the peer refused says nothing about the path: the lane comes back
  // as soon as it is rebuilt.
  lane_failed(p, nic, std::string("work request failed: ") + std::string(verbs::to_string(wc.status)),
              request_error(wc.status) ? balancer::Balancer::Fault::kRequest : balancer::Balancer::Fault::kPath);
}

void FlowEngine::lane_failed(Peer& p, uint16_t nic, const std::string& reason, balancer::Balancer::Fault fault) {
  auto& lane = p.lanes[nic];
  const bool was_dead = lane.dead;
  lane.dead = true;
  if (!was_dead) {
    stop_lane_qps(p, nic);
    publish_lane_qps(nic);
  }
  lane.posted = 0;
  for (auto& q : lane.qps) q.posted = 0;
  resend_lane_mail(p, nic);
  lane.backlog.clear();  // still tracked by the balancer: mark_down hands them back
  lane.checks_out = 0;
  // A lane that was recovering carried nothing: its rejoin failed, which is no failover.
  const bool was_up = p.balancer->state(nic) == balancer::LaneState::kUp;
  std::vector<balancer::Chunk> moved = p.balancer->mark_down(nic, now_us(), reason, fault);
  if (!was_dead) {
    if (!was_up) {
      base::log_limited(*flow_log(), g_rejoin_log, spdlog::level::info,
                        "rejoin failed nic={} peer={} reason={} action=rebuild_qp",
                        nic_names_[nic], p.name, base::q(reason));
    } else if (fault == balancer::Balancer::Fault::kPath) {
      lane_counters_[nic]->failovers.fetch_add(1, std::memory_order_relaxed);
      flow_log()->warn("path failed nic={} peer={} reason={} chunks_moved={}", nic_names_[nic], p.name, base::q(reason),
                       moved.size());
    } else {
      flow_log()->info("request refused by peer nic={} peer={} reason={} action=rebuild_qp chunks_moved={}",
                       nic_names_[nic], p.name, reason, moved.size());
    }
    hooks_.lane_failed(p.name, nic, reason, rebuild_cause(fault));
  }
  requeue(p, moved, nic);
}

void FlowEngine::stop_lane_qps(Peer& p, uint16_t nic) {
  // The lane's QPs go down together. One failed (or the path, or the peer's side, did), but its
  // siblings are still in RTS: left there until the rebuild destroys them (later still while the
  // port is down), they would keep sending — retransmitting — the chunks just moved to other
  // lanes, and could place a stale copy after the moved one completed and the client reused the
  // memory. In ERR they send nothing more and flush their WRs; the completions, from a dead lane,
  // are ignored. A QP the device refuses to move is destroyed by the rebuild all the same.
  verbs::QpAttr err;
  err.state = verbs::QpState::kError;
  auto& lane = p.lanes[nic];
  for (uint8_t j = 0; j < lane.qp_count; ++j) (void)lane.qps[j].qp->modify(err, verbs::kQpState);
}

void FlowEngine::finish_unsent(Peer& p, const balancer::Chunk& c, Transfer* t, rdmad_status status) {
  if (c.nic != balancer::kNoNic) p.balancer->cancel(c.id);  // a chunk without a lane is not tracked
  chunk_finished(t, status);
}

void FlowEngine::requeue(Peer& p, std::vector<balancer::Chunk>& moved, uint16_t failed_nic) {
  for (balancer::Chunk& c : moved) {
    // The chunk got a new id from the balancer: find its transfer by the tag.
    Transfer* t = transfers_[tag_slot(c.tag)].get();
    if (t != nullptr && t->status != RDMAD_OK) {  // its request failed: not sent again (post_chunk)
      finish_unsent(p, c, t, t->status);
      continue;
    }
    if (t != nullptr && t->imm && failed_nic != balancer::kNoNic) {
      // Its WRITE with immediate may have completed the peer's receive: sent again, it would land
      // after the receive was handed back. The peer says which (flow_immediate.cc).
      if (c.nic != balancer::kNoNic) p.balancer->cancel(c.id);
      ask_about(p, t, failed_nic);
      continue;
    }
    if (c.nic == balancer::kNoNic && !p.balancer->repost(c, now_us())) {
      p.orphans.push_back(c);
      continue;
    }
    p.chunks[c.id & kChunkSlotMask] = Peer::ChunkInfo{c.id, t, tag_index(c.tag), 0};
    p.lanes[c.nic].backlog.push_back(c);
    note_lane(p, t, c.nic);
  }
}

void FlowEngine::note_lane(const Peer& p, const Transfer* t, uint16_t nic) {
  if (t == nullptr || t->flow == nullptr || t->lanes == balancer::kEveryLane) return;
  Flow& f = *t->flow;
  const bool outside = !balancer::lane_in(t->lanes, nic);
  if (outside == f.spilled) return;
  f.spilled = outside;
  if (outside) {
    counters_.pinned_spills.fetch_add(1, std::memory_order_relaxed);
    base::log_limited(*flow_log(), g_spill_log, spdlog::level::warn,
                      "pinned flow left its nics flow={} peer={} nic_mask={:#x} now_on={} reason=\"its nics are down\"",
                      f.setup.id, p.name, t->lanes, nic_names_[nic]);
  } else {
    base::log_limited(*flow_log(), g_spill_log, spdlog::level::info, "pinned flow back on its nics flow={} peer={} nic={}",
                      f.setup.id, p.name, nic_names_[nic]);
  }
}

void FlowEngine::chunk_finished(Transfer* t, rdmad_status status) {
  ++t->chunks_done;
  if (status != RDMAD_OK && t->status == RDMAD_OK) {
    t->status = status;
    t->chunks_total = t->chunks_planned;  // plan nothing more of a failed request
  }
  if (t->chunks_done < t->chunks_total) return;
  t->placed = true;
  if (t->flow == nullptr) {  // its flow closed while chunks were in flight
    free_transfer(t);
    return;
  }
  progress(*t->flow);
}

void FlowEngine::progress(Flow& f) {
  // Completions in submission order: a request completes after everything submitted before it,
  // so a SEND's notification reaches the peer only after the WRITEs before it were placed.
  while (!f.order.empty() && f.order.front()->placed) {
    Transfer* t = f.order.front();
    f.order.pop_front();
    if (t->op != ring::Op::kSend) --f.accesses_in_order;
    finish(f, t);
  }
}

void FlowEngine::finish(Flow& f, Transfer* t) {
  if (t->imm && t->status == RDMAD_OK) {
    counters_.sends_by_immediate.fetch_add(1, std::memory_order_relaxed);  // it completed the receive
  } else if (t->op == ring::Op::kSend && t->recv_id != 0 && f.peer != nullptr) {
    peer::SendDone done;
    done.channel = f.setup.channel;
    done.recv_id = t->recv_id;
    done.bytes = t->status == RDMAD_OK ? t->sqe.length : 0;
    done.status = t->status;
    send_done_to(*f.peer, done, t->lanes);
  }
  ring::Cqe c{};
  c.wr_id = t->sqe.wr_id;
  c.length = t->status == RDMAD_OK ? t->result_bytes : 0;
  c.status = t->status;
  c.op = t->sqe.op;
  if (duration_ != nullptr) duration_->Observe(static_cast<double>(now_us() - t->started_us) * 1e-6);
  (t->status == RDMAD_OK ? counters_.transfers_completed : counters_.transfers_failed)
      .fetch_add(1, std::memory_order_relaxed);
  free_transfer(t);
  write_cqe(f, c);
}

void FlowEngine::write_cqe(Flow& f, const ring::Cqe& cqe) {
  base::trace::mark(base::trace::Point::kCompletionWritten, cqe.wr_id);
  --f.uncompleted;
  // Room is reserved when a request is taken (uncompleted <= cq_depth); a client that moved its
  // head backwards breaks that, and only its flow fails.
  if (!f.cq.push(cqe)) {
    fail_flow(f, "completion ring full (consumer index out of range)");
    return;
  }
  if (ring::needs_doorbell(f.header->client_armed)) {
    uint64_t one = 1;
    (void)!::write(f.setup.completion_fd, &one, sizeof(one));
  }
}

void FlowEngine::fail_peer_transfers(Peer& p, rdmad_status status) {
  // Every transfer of this peer's flows fails; receives and sends waiting for the other side too.
  std::vector<Transfer*> affected;
  for (auto& t : transfers_) {
    if (!t || t->flow == nullptr || t->flow->peer != &p) continue;
    affected.push_back(t.get());
  }
  // Requests whose flow closed while their chunks were in flight belong to nobody else.
  for (auto& info : p.chunks) {
    Transfer* t = info.transfer;
    info.transfer = nullptr;
    if (t != nullptr && t->flow == nullptr && t->local.pin != nullptr) free_transfer(t);
  }
  // Sends held for the peer's answer about their immediate, of flows closed meanwhile.
  for (auto& [recv_id, t] : p.asking)
    if (t->flow == nullptr) free_transfer(t);
  p.asking.clear();
  p.planning.clear();
  p.waiting_sends.clear();
  p.orphans.clear();
  for (Transfer* t : affected) {
    if (t->op == ring::Op::kRecv) {
      t->unfilled.reset();  // its credit ends with the session
      ring::Cqe c{};
      c.wr_id = t->sqe.wr_id;
      c.status = status;
      c.op = t->sqe.op;
      Flow& f = *t->flow;
      free_transfer(t);
      write_cqe(f, c);
      continue;
    }
    // The peer's QPs are destroyed right after this: nothing of theirs completes any more.
    t->status = status;
    t->placed = true;
  }
}

FlowEngine::Transfer* FlowEngine::alloc_transfer() {
  uint32_t slot;
  if (!free_transfers_.empty()) {
    slot = free_transfers_.back();
    free_transfers_.pop_back();
  } else {
    slot = static_cast<uint32_t>(transfers_.size());
    transfers_.push_back(nullptr);
  }
  if (!transfers_[slot]) transfers_[slot] = std::make_unique<Transfer>();
  Transfer* t = transfers_[slot].get();
  const uint32_t gen = t->gen + 1;
  *t = Transfer{};
  t->slot = slot;
  t->gen = gen;
  ++in_flight_;
  counters_.transfers_in_flight.store(in_flight_, std::memory_order_relaxed);
  return t;
}

void FlowEngine::free_transfer(Transfer* t) {
  if (t->recv_mrs) {
    t->recv_mrs.reset();  // the peer can write into the buffer no more
    const uint8_t s = t->recv_peer_slot;
    if (s < peers_.size() && peers_[s] && peers_[s]->gen == t->recv_peer_gen) {
      Peer& p = *peers_[s];
      if (p.receives_out > 0) --p.receives_out;
      // Withdrawn unfilled: the peer drops the credit (else credits of closed flows would pile up
      // there until none were left for anyone's receives).
      if (t->unfilled) send_mail(p, *t->unfilled, balancer::kEveryLane);
    }
  }
  t->unfilled.reset();
  registrations_.unpin(t->local.pin);
  t->local.pin = nullptr;
  t->flow = nullptr;
  t->placed = false;
  free_transfers_.push_back(t->slot);
  --in_flight_;
  counters_.transfers_in_flight.store(in_flight_, std::memory_order_relaxed);
}

FlowEngine::Transfer* FlowEngine::transfer_by_recv_id(uint64_t recv_id) {
  const auto slot = static_cast<uint32_t>(recv_id);
  if (slot >= transfers_.size() || !transfers_[slot]) return nullptr;
  Transfer* t = transfers_[slot].get();
  if (t->gen != static_cast<uint32_t>(recv_id >> 32) || t->flow == nullptr) return nullptr;
  return t;
}

}  // namespace rdmad::flow
