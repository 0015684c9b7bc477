// Control-side operations: memory regions (on the registering thread, against the datapath's
// seqlock reads), QP creation and the ibverbs state machine (on the datapath thread), plus the
// shared completion/flush/transmit helpers.
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "soft_nic.h"

namespace rdmad::verbs::soft {
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

Status SoftNic::add_mr(void* addr, size_t length, uint32_t access, uint32_t pd_id, uint32_t* key) {
  uint32_t r[2];
  if (!random_bytes(r, sizeof r)) return Status::error(std::string("soft nic: getrandom: ") + std::strerror(errno));
  std::lock_guard lock(mr_mu_);
  // The search starts at a random entry: the index is part of the key, and a table filled from the
  // front would give those bits away.
  for (uint32_t n = 0; n < kMaxMrs; ++n) {
    const uint32_t i = mr_index(r[0] + n);
    MrEntry& e = mrs_[i];
    if (i == 0 || e.key.load(std::memory_order_relaxed) != 0) continue;  // entry 0 is never used
    uint32_t k = mr_key(i, r[1]);
    if (k == e.last_key) k = mr_key(i, r[1] + kMaxMrs);  // a late packet for the old key must miss
    // A reader that sees any of these stores also sees the key cleared by remove_mr (seqlock).
    std::atomic_thread_fence(std::memory_order_release);
    e.addr.store(reinterpret_cast<uint64_t>(addr), std::memory_order_relaxed);
    e.length.store(length, std::memory_order_relaxed);
    e.access.store(access, std::memory_order_relaxed);
    e.pd_id.store(pd_id, std::memory_order_relaxed);
    e.last_key = k;
    *key = k;
    e.key.store(k, std::memory_order_release);
    return Status::success();
  }
  return Status::no_resource("soft nic: memory region table full");
}

void SoftNic::remove_mr(uint32_t key) {
  const uint32_t i = mr_index(key);
  {
    std::lock_guard lock(mr_mu_);
    // seq_cst: ordered against the datapath's pass_state_ store and a posting thread's raise of
    // PostCrcRing::reading (wait_posts), both made before their key lookups.
    if (i == 0 || mrs_[i].key.load(std::memory_order_relaxed) != key) return;
    mrs_[i].key.store(0, std::memory_order_seq_cst);
  }
  wait_pass();
  std::vector<std::shared_ptr<QpShared>> qps;
  {
    std::lock_guard lock(posters_mu_);
    qps = posters_;
  }
  wait_posts(qps);
}

void SoftNic::wait_pass() const {
  // Either the pass in progress looked the key up after the clear (and missed), or this load sees
  // it running (odd) and the wait ends when it does. An even state: no pass runs, and the next
  // one misses the key.
  const uint64_t seen = pass_state_.load(std::memory_order_seq_cst);
  if ((seen & 1) == 0 || std::this_thread::get_id() == thread_.get_id()) return;  // a command: between lookups
  for (int looks = 0; pass_state_.load(std::memory_order_acquire) == seen; ++looks) {
    if (looks < 64) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

bool SoftNic::find_mr(uint32_t key, MrView* out) const {
  const uint32_t i = mr_index(key);
  if (i == 0) return false;
  const MrEntry& e = mrs_[i];
  // A seqlock read, so that posting threads may call it too. seq_cst: ordered against
  // remove_mr's clear (crc_at_post.cc explains the pairing). On x86 this costs the datapath
  // nothing over plain loads but the second look at the key.
  if (e.key.load(std::memory_order_seq_cst) != key) return false;
  *out = {e.addr.load(std::memory_order_relaxed), e.length.load(std::memory_order_relaxed),
          e.access.load(std::memory_order_relaxed), e.pd_id.load(std::memory_order_relaxed)};
  std::atomic_thread_fence(std::memory_order_acquire);
  return e.key.load(std::memory_order_relaxed) == key;  // not refilled while we read
}

bool SoftNic::check_local(const QpContext& qp, const Sge& sge, bool need_write) const {
  if (sge.length == 0) return true;
  MrView mr;
  if (!find_mr(sge.lkey, &mr) || mr.pd_id != qp.pd_id) return false;
  if (need_write && (mr.access & kAccessLocalWrite) == 0) return false;
  return covers(mr, sge.addr, sge.length);
}

bool SoftNic::check_remote(const QpContext& qp, uint64_t va, uint32_t len, uint32_t rkey,
                           uint32_t access) const {
  if ((qp.attr.access_flags & access) == 0) return false;
  if (len == 0) return true;
  MrView mr;
  if (!find_mr(rkey, &mr) || mr.pd_id != qp.pd_id || (mr.access & access) == 0) return false;
  return covers(mr, va, len);
}

Result<QpContext*> SoftNic::add_qp(uint32_t pd_id, std::shared_ptr<QpShared> shared,
                                   std::shared_ptr<CqShared> scq, std::shared_ptr<CqShared> rcq) {
  uint32_t r[2];
  if (!random_bytes(r, sizeof r)) return Status::error(std::string("soft nic: getrandom: ") + std::strerror(errno));
  for (uint32_t n = 0; n < kMaxQps; ++n) {
    const uint32_t i = qp_index(r[0] + n);  // a random entry first, as for memory regions
    if (qps_[i]) continue;
    uint32_t qpn = make_qpn(i, r[1]);
    // Never a special QPN, nor the entry's previous one (late packets for that QP must miss).
    for (uint32_t bump = 1; !usable_qpn(qpn) || qpn == last_qpn_[i]; ++bump) qpn = make_qpn(i, r[1] + bump * kMaxQps);
    last_qpn_[i] = qpn;
    auto qp = std::make_unique<QpContext>();
    qp->qpn = qpn;
    qp->pd_id = pd_id;
    qp->slots.resize(shared->sq.capacity());
    qp->responses.resize(kResponseDepth);
    qp->shared = std::move(shared);
    qp->send_cq = std::move(scq);
    qp->recv_cq = std::move(rcq);
    QpContext* raw = qp.get();
    qps_[i] = std::move(qp);
    {
      std::lock_guard lock(posters_mu_);
      posters_.push_back(raw->shared);
    }
    // Setup may allocate; the datapath's inserts then only reuse the wheel's storage.
    wheel_.grow((i + 1) * kQpTimers);
    return raw;
  }
  return Status::no_resource("soft nic: queue pair table full");
}

void SoftNic::remove_qp(uint32_t qpn) {
  QpContext* qp = qp_by_num(qpn);
  if (qp == nullptr) return;
  cancel_timers(*qp);
  {
    std::lock_guard lock(posters_mu_);
    std::erase(posters_, qp->shared);
  }
  std::erase(active_, qp);
  qps_[qp_index(qpn)].reset();
}

QpContext* SoftNic::qp_by_num(uint32_t qpn) {
  // O(1): the low bits pick the entry, the whole number must match.
  QpContext* qp = qps_[qp_index(qpn)].get();
  return qp != nullptr && qp->qpn == qpn ? qp : nullptr;
}

Status SoftNic::modify_qp(uint32_t qpn, const QpAttr& a, uint32_t mask) {
  QpContext* qp = qp_by_num(qpn);
  if (qp == nullptr) return Status::error("soft nic: no such qp");
  Status st = modify_state(*qp, a, mask);
  after_modify(*qp);
  return st;
}

Status SoftNic::modify_state(QpContext& ctx, const QpAttr& a, uint32_t mask) {
  QpContext* qp = &ctx;
  QpState to = (mask & kQpState) ? a.state : qp->state;
  if ((mask & kQpState) && !legal_transition(qp->state, to)) {
    return Status::error("soft nic: illegal qp transition " + std::string(to_string(qp->state)) + " -> " +
                         std::string(to_string(to)));
  }
  // RESET→INIT needs the access flags, as in ibverbs (ib_core refuses the transition without
  // IB_QP_ACCESS_FLAGS on every device): a QP must not get remote access by default.
  if (qp->state == QpState::kReset && to == QpState::kInit && (mask & kQpAccessFlags) == 0) {
    return Status::error("soft nic: RESET->INIT needs access_flags");
  }
  if (qp->state == QpState::kInit && to == QpState::kRtr) {
    uint32_t need = kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpAv;
    if ((mask & need) != need) return Status::error("soft nic: INIT->RTR needs path_mtu, dest_qpn, rq_psn, av");
  }
  if (qp->state == QpState::kRtr && to == QpState::kRts && (mask & kQpSqPsn) == 0) {
    return Status::error("soft nic: RTR->RTS needs sq_psn");
  }
  if ((mask & kQpPathMtu) && !valid_mtu(a.path_mtu_bytes)) return Status::error("soft nic: bad path mtu");
  if ((mask & kQpRetryCnt) && a.retry_cnt > 7) return Status::error("soft nic: retry_cnt > 7");
  if ((mask & kQpRnrRetry) && a.rnr_retry > 7) return Status::error("soft nic: rnr_retry > 7");
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
    QpContext fresh;
    fresh.active = qp->active;  // it stays on active_ until its next turn
    fresh.qpn = qp->qpn;
    fresh.pd_id = qp->pd_id;
    fresh.shared = std::move(qp->shared);
    fresh.send_cq = std::move(qp->send_cq);
    fresh.recv_cq = std::move(qp->recv_cq);
    fresh.slots = std::move(qp->slots);
    fresh.responses = std::move(qp->responses);
    *qp = std::move(fresh);
  } else if (to == QpState::kRtr) {
    qp->mtu = q.path_mtu_bytes;
    qp->shared->mtu.store(qp->mtu, std::memory_order_relaxed);  // published with the state below
    auto& shift = mtu_shifts_[std::countr_zero(qp->mtu) - 8];
    if (config_.crc_at_post && !shift) shift = std::make_unique<roce::Crc32Shift>(qp->mtu);
    qp->mtu_shift = shift.get();
    qp->epsn = q.rq_psn;
    roce::IpAddr dst;
    if (q.dest_gid.is_ipv4_mapped()) {
      std::memcpy(dst.bytes.data(), q.dest_gid.raw.data() + 12, 4);
    } else {
      dst = roce::IpAddr::from_v6(q.dest_gid.raw);
    }
    if (dst.v6 != local_ip_.v6) return Status::error("soft nic: peer address family differs from the nic's");
    qp->dest_len = make_sockaddr(dst, q.dest_udp_port, &qp->dest_sa);
    qp->ip.src = local_ip_;
    qp->ip.dst = dst;
    const SourceSocket& from = source_for(qp->qpn, q.dest_qp_num);
    qp->tx_fd = from.fd;
    qp->ip.src_port = from.port;
    qp->ip.dst_port = q.dest_udp_port;
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

QpAttr SoftNic::query_qp(uint32_t qpn) {
  QpContext* qp = qp_by_num(qpn);
  return qp ? qp->attr : QpAttr{};
}

CqShared::CqShared(uint32_t depth, uint32_t nic)
    : ring(depth), nic_id(nic), event_fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

CqShared::~CqShared() {
  if (event_fd >= 0) ::close(event_fd);
}

bool SoftNic::push_completion(CqShared& cq, const WorkCompletion& wc) {
  if (!cq.ring.push(wc)) return false;
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

void SoftNic::set_error(QpContext& qp) {
  qp.state = QpState::kError;
  qp.attr.state = QpState::kError;
  qp.shared->state.store(QpState::kError, std::memory_order_release);
  qp.resp_count = 0;
  flush(qp);
}

void SoftNic::flush(QpContext& qp) {
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

void SoftNic::release_send(QpShared& s) {
  const PostCrc& pc = s.post_crc[s.sq.slot(s.sq.head())];
  if (pc.count != 0) s.crc_ring.head.store(pc.first + pc.count, std::memory_order_release);
  s.sq.release();
}

void SoftNic::send_packet(const QpContext& qp, const roce::Packet& pkt, uint8_t tos, const uint32_t* payload_crc) {
  if (tx_.full()) flush_tx();
  size_t n;
  if (pkt.payload.size() >= kGatherMinPayloadBytes) {
    // The payload leaves from the memory region itself: the kernel's copy into the socket buffer
    // is the only one on this side. The region stays valid until flush_tx (same pass).
    const roce::GatherEncoding e =
        payload_crc != nullptr && qp.mtu_shift != nullptr
            ? roce::encode_datagram_gather(qp.ip, pkt, tx_.next_buffer(), *payload_crc, *qp.mtu_shift)
            : roce::encode_datagram_gather(qp.ip, pkt, tx_.next_buffer());
    if (e.head_bytes == 0) return;
    n = e.head_bytes + pkt.payload.size() + e.tail_bytes;
    tx_.commit_gather(qp.tx_fd, e.head_bytes, pkt.payload, e.tail_bytes, qp.dest_sa, qp.dest_len, tos);
  } else {
    n = roce::encode_datagram(qp.ip, pkt, tx_.next_buffer());
    if (n == 0) return;
    tx_.commit(qp.tx_fd, n, qp.dest_sa, qp.dest_len, tos);
  }
  ++counters_.tx_packets;
  counters_.tx_bytes += n;
}

void SoftNic::send_cnp(const QpContext& qp) {
  roce::Packet cnp = roce::make_cnp(qp.attr.dest_qp_num);
  send_packet(qp, cnp, static_cast<uint8_t>(config_.dcqcn.cnp_dscp << 2));
  ++counters_.np_cnp_sent;
}

void SoftNic::flush_tx() {
  if (tx_.count() > 0) tx_.send();
}

}  // namespace rdmad::verbs::soft
