// A datapath's QPs: creation and the ibverbs state machine (on the datapath thread, reached
// through commands), plus the completion/flush/transmit helpers the requester and responder share.
#include <sys/eventfd.h>
#include <unistd.h>

#include <bit>
#include <cstring>

#include "datapath.h"

namespace rdmad::verbs::engine {
namespace {

bool valid_mtu(uint32_t mtu) { return mtu == 256 || mtu == 512 || mtu == 1024 || mtu == 2048 || mtu == 4096; }

// ibverbs' legal transitions (IB spec 10.3.1, RC subset without SQD/SQE).
bool legal_transition(QpState from, QpState to) {
  if (to == QpState::kReset || to == QpState::kError) return true;
  switch (from) {
    case QpState::kReset: return to == QpState::kInit;
    case QpState::kInit: return to == QpState::kInit || to == QpState::kRtr;
    case QpState::kRtr: return to == QpState::kRts;
    case QpState::kRts: return to == QpState::kRts;
    case QpState::kError: return false;
  }
  return false;
}

}  // namespace

bool Datapath::check_local(const QpContext& qp, const Sge& sge, bool need_write) const {
  if (sge.length == 0) return true;
  MrView mr;
  if (!nic_.find_mr(sge.lkey, &mr) || mr.pd_id != qp.pd_id) return false;
  if (need_write && (mr.access & kAccessLocalWrite) == 0) return false;
  return covers(mr, sge.addr, sge.length);
}

bool Datapath::check_remote(const QpContext& qp, uint64_t va, uint32_t len, uint32_t rkey,
                           uint32_t access) const {
  if ((qp.attr.access_flags & access) == 0) return false;
  if (len == 0) return true;
  MrView mr;
  if (!nic_.find_mr(rkey, &mr) || mr.pd_id != qp.pd_id || (mr.access & access) == 0) return false;
  return covers(mr, va, len);
}

Result<QpContext*> Datapath::add_qp(uint32_t index, uint32_t qpn, uint32_t pd_id, std::shared_ptr<QpShared> shared,
                                    std::shared_ptr<CqShared> scq, std::shared_ptr<CqShared> rcq) {
  const uint32_t slot = index / nic_.datapath_count();
  if (index % nic_.datapath_count() != index_ || slot >= qps_.size() || qps_[slot]) {
    return Status::error("engine nic: queue pair entry not reserved for this datapath");
  }
  auto qp = std::make_unique<QpContext>();
  qp->qpn = qpn;
  qp->slot = slot;
  qp->pd_id = pd_id;
  qp->slots.resize(shared->sq.capacity());
  // The responder's ring (2.5 KiB) comes at RTR: a NIC full of QPs never connected does not pay it.
  qp->shared = std::move(shared);
  qp->send_cq = std::move(scq);
  qp->recv_cq = std::move(rcq);
  QpContext* raw = qp.get();
  qps_[slot] = std::move(qp);
  nic_.add_poster(raw->shared);
  // Setup may allocate; the datapath's inserts then only reuse the wheel's storage.
  wheel_.grow((slot + 1) * kQpTimers);
  return raw;
}

void Datapath::remove_qp(uint32_t qpn) {
  QpContext* qp = qp_by_num(qpn);
  if (qp == nullptr) return;
  cancel_timers(*qp);
  close_path(*qp);
  nic_.remove_poster(qp->shared);
  std::erase(active_, qp);
  qps_[qp->slot].reset();
}

QpContext* Datapath::qp_by_num(uint32_t qpn) {
  // O(1): the low bits pick the entry, the whole number must match. A number whose entry belongs
  // to another datapath is no QP of this one's (its port steers such packets elsewhere).
  const uint32_t index = nic_.numbering().index(qpn);
  const uint32_t n = nic_.datapath_count();
  if (index % n != index_) return nullptr;
  QpContext* qp = qps_[index / n].get();
  return qp != nullptr && qp->qpn == qpn ? qp : nullptr;
}

Status Datapath::modify_qp(uint32_t qpn, const QpAttr& a, uint32_t mask) {
  QpContext* qp = qp_by_num(qpn);
  if (qp == nullptr) return Status::error("engine nic: no such qp");
  Status st = modify_state(*qp, a, mask);
  after_modify(*qp);
  return st;
}

Status Datapath::modify_state(QpContext& ctx, const QpAttr& a, uint32_t mask) {
  QpContext* qp = &ctx;
  QpState to = (mask & kQpState) ? a.state : qp->state;
  if ((mask & kQpState) && !legal_transition(qp->state, to)) {
    return Status::error("engine nic: illegal qp transition " + std::string(to_string(qp->state)) + " -> " +
                         std::string(to_string(to)));
  }
  // RESET→INIT needs the access flags, as in ibverbs (ib_core refuses the transition without
  // IB_QP_ACCESS_FLAGS on every device): a QP must not get remote access by default.
  if (qp->state == QpState::kReset && to == QpState::kInit && (mask & kQpAccessFlags) == 0) {
    return Status::error("engine nic: RESET->INIT needs access_flags");
  }
  if (qp->state == QpState::kInit && to == QpState::kRtr) {
    uint32_t need = kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpAv;
    if ((mask & need) != need) return Status::error("engine nic: INIT->RTR needs path_mtu, dest_qpn, rq_psn, av");
  }
  if (qp->state == QpState::kRtr && to == QpState::kRts && (mask & kQpSqPsn) == 0) {
    return Status::error("engine nic: RTR->RTS needs sq_psn");
  }
  if ((mask & kQpPathMtu) && !valid_mtu(a.path_mtu_bytes)) return Status::error("engine nic: bad path mtu");
  if ((mask & kQpRetryCnt) && a.retry_cnt > 7) return Status::error("engine nic: retry_cnt > 7");
  if ((mask & kQpRnrRetry) && a.rnr_retry > 7) return Status::error("engine nic: rnr_retry > 7");
  QpAttr& q = qp->attr;
  if (mask & kQpAccessFlags) q.access_flags = a.access_flags;
  if (mask & kQpPathMtu) q.path_mtu_bytes = a.path_mtu_bytes;
  if (mask & kQpDestQpn) q.dest_qp_num = a.dest_qp_num & roce::kQpnMask;
  if (mask & kQpRqPsn) q.rq_psn = a.rq_psn & roce::kPsnMask;
  if (mask & kQpSqPsn) q.sq_psn = a.sq_psn & roce::kPsnMask;
  if (mask & kQpTimeout) q.timeout = a.timeout;
  if (mask & kQpRetryCnt) q.retry_cnt = a.retry_cnt;
  if (mask & kQpRnrRetry) q.rnr_retry = a.rnr_retry;
  if (mask & kQpMinRnrTimer) q.min_rnr_timer = a.min_rnr_timer & 0x1F;
  if (mask & kQpMaxRdAtomic) q.max_rd_atomic = a.max_rd_atomic;
  if (mask & kQpMaxDestRdAtomic) q.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & kQpAv) {
    q.dest_gid = a.dest_gid;
    q.dest_udp_port = a.dest_udp_port;
  }
  if (!(mask & kQpState) || to == qp->state) return Status::success();

  if (to == QpState::kReset) {
    QpShared& s = *qp->shared;
    while (!s.sq.empty()) release_send(s);
    RecvWr r;
    while (s.rq.pop(&r)) {
    }
    cancel_timers(*qp);
    close_path(*qp);
    QpContext fresh;
    fresh.active = qp->active;  // it stays on active_ until its next turn
    fresh.qpn = qp->qpn;
    fresh.slot = qp->slot;
    fresh.pd_id = qp->pd_id;
    fresh.shared = std::move(qp->shared);
    fresh.send_cq = std::move(qp->send_cq);
    fresh.recv_cq = std::move(qp->recv_cq);
    fresh.slots = std::move(qp->slots);
    fresh.responses = std::move(qp->responses);
    *qp = std::move(fresh);
  } else if (to == QpState::kRtr) {
    if (qp->responses.empty()) qp->responses.resize(kResponseDepth);
    qp->mtu = q.path_mtu_bytes;
    qp->shared->mtu.store(qp->mtu, std::memory_order_relaxed);  // published with the state below
    auto& shift = mtu_shifts_[std::countr_zero(qp->mtu) - 8];
    if (nic_.config().crc_at_post && !shift) shift = std::make_unique<roce::Crc32Shift>(qp->mtu);
    qp->mtu_shift = shift.get();
    qp->epsn = q.rq_psn;
    PathRequest path;
    if (q.dest_gid.is_ipv4_mapped()) {
      std::memcpy(path.dst.bytes.data(), q.dest_gid.raw.data() + 12, 4);
    } else {
      path.dst = roce::IpAddr::from_v6(q.dest_gid.raw);
    }
    if (path.dst.v6 != nic_.port().local_ip().v6) {
      return Status::error("engine nic: peer address family differs from the nic's");
    }
    path.dst_port = q.dest_udp_port;
    path.qpn = qp->qpn;
    path.dest_qpn = q.dest_qp_num;
    close_path(*qp);
    Result<uint32_t> opened = queue_.open_path(path, &qp->ip);
    if (!opened.ok()) return opened.status();
    qp->path = opened.value();
    qp->path_open = true;
    // Read responses leave from RTR on, so the flow's DCQCN state starts here.
    rp_.start(qp->rp, loop_now_);
    qp->pacer = cc::PacerState{};
    qp->np = cc::NpState{};
  } else if (to == QpState::kRts) {
    qp->next_assign_psn = q.sq_psn;
    qp->send_psn = q.sq_psn;
    qp->sent_hi = q.sq_psn;
    qp->una_psn = q.sq_psn;
    qp->accepted = qp->shared->sq.head();
    qp->send_idx = qp->accepted;
    qp->retries_left = q.retry_cnt;
    qp->rnr_left = q.rnr_retry;
  }
  qp->state = to;
  q.state = to;
  qp->shared->state.store(to, std::memory_order_release);
  return Status::success();
}

QpAttr Datapath::query_qp(uint32_t qpn) {
  QpContext* qp = qp_by_num(qpn);
  return qp ? qp->attr : QpAttr{};
}

CqShared::CqShared(uint32_t depth, uint32_t nic, uint32_t datapaths)
    : nic_id(nic), event_fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  for (uint32_t i = 0; i < datapaths; ++i) rings.push_back(std::make_unique<SpscRing<WorkCompletion>>(depth));
}

size_t CqShared::pop(std::span<WorkCompletion> out) {
  size_t n = 0;
  const auto count = static_cast<uint32_t>(rings.size());
  // Round robin over the threads' rings, so that one busy thread does not hide the others'.
  for (uint32_t k = 0; k < count && n < out.size(); ++k) {
    SpscRing<WorkCompletion>& r = *rings[(next_ring + k) % count];
    while (n < out.size() && r.pop(&out[n])) ++n;
  }
  next_ring = (next_ring + 1) % count;
  return n;
}

CqShared::~CqShared() {
  if (event_fd >= 0) ::close(event_fd);
}

bool Datapath::push_completion(CqShared& cq, const WorkCompletion& wc) {
  if (!cq.rings[index_]->push(wc)) return false;
  ++completions_pushed_;
  // Pairs with SoftCq::request_notify (set armed, then look at the ring): the fence orders the
  // push before the load, so either the consumer sees this completion or this sees it armed.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (cq.armed.load(std::memory_order_relaxed) && cq.armed.exchange(false, std::memory_order_acq_rel)) {
    const uint64_t one = 1;
    (void)!::write(cq.event_fd, &one, sizeof one);
  }
  return true;
}

void Datapath::set_error(QpContext& qp) {
  qp.state = QpState::kError;
  qp.attr.state = QpState::kError;
  qp.shared->state.store(QpState::kError, std::memory_order_release);
  qp.resp_count = 0;
  flush(qp);
}

void Datapath::flush(QpContext& qp) {
  QpShared& s = *qp.shared;
  while (!s.sq.empty()) {
    const SendWr& wr = s.sq.at(s.sq.head());
    WorkCompletion wc{wr.wr_id, WcStatus::kWrFlushed, WcOpcode::kSend, false, qp.qpn, 0, 0};
    if (!push_completion(*qp.send_cq, wc)) {
      qp.cq_full = true;  // the next pass continues
      break;
    }
    release_send(s);
  }
  qp.accepted = qp.send_idx = s.sq.head();
  while (!s.rq.empty()) {
    const RecvWr& wr = s.rq.at(s.rq.head());
    WorkCompletion wc{wr.wr_id, WcStatus::kWrFlushed, WcOpcode::kRecv, false, qp.qpn, 0, 0};
    if (!push_completion(*qp.recv_cq, wc)) {
      qp.cq_full = true;
      break;
    }
    s.rq.release();
  }
  qp.recv_active = false;
}

void Datapath::release_send(QpShared& s) {
  const PostCrc& pc = s.post_crc[s.sq.slot(s.sq.head())];
  if (pc.count != 0) s.crc_ring.head.store(pc.first + pc.count, std::memory_order_release);
  s.sq.release();
}

void Datapath::send_packet(const QpContext& qp, const roce::Packet& pkt, uint8_t tos, const uint32_t* payload_crc) {
  if (queue_.tx_full()) flush_tx();
  const std::span<uint8_t> slot = queue_.tx_slot();
  size_t n;
  if (pkt.payload.size() >= kGatherMinPayloadBytes) {
    // The payload leaves from the memory region itself (a port that sends in place reads it when
    // the batch leaves, in this pass; one that copies, at commit).
    const roce::GatherEncoding e =
        payload_crc != nullptr && qp.mtu_shift != nullptr
            ? roce::encode_datagram_gather(qp.ip, pkt, slot, *payload_crc, *qp.mtu_shift)
            : roce::encode_datagram_gather(qp.ip, pkt, slot);
    if (e.head_bytes == 0) return;
    n = e.head_bytes + pkt.payload.size() + e.tail_bytes;
    queue_.tx_commit(qp.path, e.head_bytes, pkt.payload, e.tail_bytes, tos);
  } else {
    n = roce::encode_datagram(qp.ip, pkt, slot);
    if (n == 0) return;
    queue_.tx_commit(qp.path, n, {}, 0, tos);
  }
  ++counters_.tx_packets;
  counters_.tx_bytes += n;
}

void Datapath::send_cnp(const QpContext& qp) {
  roce::Packet cnp = roce::make_cnp(qp.attr.dest_qp_num);
  send_packet(qp, cnp, static_cast<uint8_t>(dcqcn_.cnp_dscp << 2));
  ++counters_.np_cnp_sent;
}

void Datapath::flush_tx() {
  if (queue_.tx_pending() > 0) queue_.tx_flush();
}

void Datapath::close_path(QpContext& qp) {
  if (!qp.path_open) return;
  // Packets still batched for the path leave first: the handle may be reused.
  flush_tx();
  queue_.close_path(qp.path);
  qp.path_open = false;
}

}  // namespace rdmad::verbs::engine
