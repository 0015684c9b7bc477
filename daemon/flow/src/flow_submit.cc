// Taking requests from the submission rings: validation (every field of an entry comes from the
// client's memory and is checked after it was copied), local and remote ranges, receive credits.
#include <spdlog/spdlog.h>

#include "engine_state.h"
#include "rdmad/base/log_fields.h"
#include "rdmad/base/log_limiter.h"
#include "rdmad/base/trace_points.h"

namespace rdmad::flow {
namespace {

// Requests taken from one flow per pass, so one busy flow cannot starve the others.
constexpr uint32_t kBatch = 32;

uint32_t remote_right(ring::Op op) {
  return op == ring::Op::kRead ? RDMAD_ACCESS_REMOTE_READ : RDMAD_ACCESS_REMOTE_WRITE;
}

base::LogLimiter g_credit_log;
base::LogLimiter g_ring_log;  // clients that break their ring protocol

}  // namespace

bool FlowEngine::poll_flows() {
  bool progress = false;
  for (auto& [id, fp] : flows_) {
    Flow& f = *fp;
    if (f.failed) continue;
    uint32_t n = 0;
    ring::Sqe sqe;
    // A request is taken only when its completion is sure to fit in the completion ring.
    while (n < kBatch && f.uncompleted < f.setup.cq_depth) {
      const uint32_t avail = f.sq.available();
      if (avail == UINT32_MAX) {
        fail_flow(f, "submission ring index out of range");
        break;
      }
      if (avail == 0 || !f.sq.pop(sqe)) break;
      ++n;
      take_request(f, sqe);
    }
    if (n > 0) {
      f.sq.release();
      progress = true;
    }
  }
  return progress;
}

void FlowEngine::fail_flow(Flow& f, const char* why) {
  f.failed = true;
  f.header->flow_state.store(static_cast<uint32_t>(ring::FlowState::kFailed));
  counters_.flow_errors.fetch_add(1, std::memory_order_relaxed);
  base::log_limited(*flow_log(), g_ring_log, spdlog::level::warn, "flow failed flow={} reason={}", f.setup.id, base::q(why));
  uint64_t one = 1;
  (void)!::write(f.setup.completion_fd, &one, sizeof(one));
}

void FlowEngine::complete_now(Flow& f, const ring::Sqe& sqe, rdmad_status status, uint64_t length) {
  ring::Cqe c{};
  c.wr_id = sqe.wr_id;
  c.length = length;
  c.status = status;
  c.op = sqe.op;
  ++f.uncompleted;
  write_cqe(f, c);
}

void FlowEngine::take_request(Flow& f, const ring::Sqe& sqe) {
  base::trace::mark(base::trace::Point::kRequestTaken, sqe.op);
  const auto op = static_cast<ring::Op>(sqe.op);
  if (op != ring::Op::kWrite && op != ring::Op::kRead && op != ring::Op::kSend && op != ring::Op::kRecv) {
    complete_now(f, sqe, RDMAD_ERR_INVALID_ARGUMENT, 0);
    return;
  }
  if (sqe.flags != 0 || sqe.reserved0 != 0 || sqe.reserved1 != 0) {
    complete_now(f, sqe, RDMAD_ERR_INVALID_ARGUMENT, 0);
    return;
  }
  if (op == ring::Op::kRecv && sqe.length == 0) {
    // A receive must be a buffer the peer can write into (and peers refuse an empty one).
    complete_now(f, sqe, RDMAD_ERR_INVALID_ARGUMENT, 0);
    return;
  }
  if (f.peer == nullptr) {
    complete_now(f, sqe, RDMAD_ERR_PEER, 0);
    return;
  }
  Peer& p = *f.peer;
  // Remote range first (no pin to undo when it fails).
  RemoteRange remote;
  if (op == ring::Op::kWrite || op == ring::Op::kRead) {
    auto it = f.imports.find(sqe.remote_handle);
    if (it == f.imports.end()) {
      complete_now(f, sqe, RDMAD_ERR_NOT_FOUND, 0);
      return;
    }
    remote = it->second;
    if (remote.awaiting_grant) {
      // Its peer restarted (or the session dropped): retryable until the grant is due.
      complete_now(f, sqe, now_us() - p.ready_us > kRegrantGraceUs ? RDMAD_ERR_NOT_FOUND : RDMAD_ERR_PEER, 0);
      return;
    }
    if ((remote.rights & remote_right(op)) == 0) {
      complete_now(f, sqe, RDMAD_ERR_REMOTE_ACCESS, 0);
      return;
    }
    if (sqe.remote_offset > remote.length || sqe.length > remote.length - sqe.remote_offset) {
      complete_now(f, sqe, RDMAD_ERR_REMOTE_ACCESS, 0);
      return;
    }
  }
  // What the local registration must allow: the NIC writes into it for a READ, the peer for a RECV.
  uint32_t need = 0;
  if (op == ring::Op::kRead) need = RDMAD_ACCESS_LOCAL_WRITE;
  if (op == ring::Op::kRecv) need = RDMAD_ACCESS_REMOTE_WRITE;
  auto pinned = registrations_.pin(f.setup.conn_id, sqe.local_handle, sqe.local_offset, sqe.length, need);
  if (!pinned.ok()) {
    complete_now(f, sqe, pinned.error().status, 0);
    return;
  }
  // The keys this peer's QPs take: a receive buffer gets MRs over exactly itself (the only memory
  // of ours the peer may write); what we read from or write into locally, the registration's MRs
  // in the peer's domain (local access only).
  const clients::PinnedRange& local = pinned.value();
  std::array<uint32_t, proto::kMaxNics> lkeys{};
  std::unique_ptr<ExactRegion> recv_mrs;
  rdmad_status refused = RDMAD_OK;
  if (p.domain == nullptr) {
    refused = RDMAD_ERR_PEER;
  } else if (op == ring::Op::kRecv) {
    if (p.receives_out >= options_.max_receives_per_peer) {
      refused = RDMAD_ERR_NO_RESOURCE;
    } else if (auto r = p.domain->register_exact(local, RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE); r.ok()) {
      recv_mrs = std::make_unique<ExactRegion>(std::move(r.value()));
    } else {
      refused = r.error().status;
    }
  } else if (auto k = p.domain->local_keys(registrations_, local); k.ok()) {
    lkeys = k.value();
  } else {
    refused = k.error().status;
  }
  if (refused != RDMAD_OK) {
    registrations_.unpin(local.pin);
    complete_now(f, sqe, refused, 0);
    return;
  }
  Transfer* t = alloc_transfer();
  t->flow = &f;
  t->lanes = f.setup.nic_mask;
  t->sqe = sqe;
  t->op = op;
  t->local = local;
  t->lkeys = lkeys;
  // The registration's locality to each NIC (PCI tree for GPU memory, NUMA node for host memory)
  // as the balancer's distance classes (same numbering).
  for (size_t i = 0; i < t->distance.size(); ++i) t->distance[i] = static_cast<balancer::PciDistance>(t->local.locality[i]);
  t->remote = remote;
  t->started_us = now_us();
  ++f.uncompleted;
  const uint64_t chunk = options_.balancer.chunk_bytes;
  t->chunks_total = static_cast<uint32_t>((sqe.length + chunk - 1) / chunk);
  t->result_bytes = sqe.length;
  switch (op) {
    case ring::Op::kRecv: {
      // Advertise the buffer; the completion comes with the peer's SendDone.
      t->recv_id = uint64_t{t->gen} << 32 | t->slot;
      peer::RecvPost post;
      post.session = p.session;
      post.seq = p.posts_sent++;
      post.channel = f.setup.channel;
      post.owner_uid = f.setup.owner_uid;
      post.recv_id = t->recv_id;
      post.iova = t->local.iova;
      post.length = sqe.length;
      t->recv_mrs = std::move(recv_mrs);
      t->recv_peer_slot = p.slot;
      t->recv_peer_gen = p.gen;
      ++p.receives_out;
      post.keys = t->recv_mrs->grant_keys;
      t->unfilled = peer::RecvCancel{post.session, post.seq, post.channel, post.owner_uid, post.recv_id};
      base::trace::mark(base::trace::Point::kRecvSubmitted);
      send_mail(p, post, f.setup.nic_mask);
      return;
    }
    case ring::Op::kSend:
      f.order.push_back(t);
      start_send(p, t);
      return;
    default:
      f.order.push_back(t);
      ++f.accesses_in_order;
      if (t->chunks_total == 0) {
        t->placed = true;
        progress(f);
      } else {
        p.planning.push_back(t);
      }
      return;
  }
}

void FlowEngine::start_send(Peer& p, Transfer* t) {
  base::trace::mark(base::trace::Point::kSendStarted);
  const ChannelKey key{t->flow->setup.owner_uid, t->flow->setup.channel};
  auto& credits = p.credits[key];
  if (credits.empty()) {
    p.waiting_sends[key].push_back(t);
    return;
  }
  t->remote = credits.front();
  credits.pop_front();
  --p.credits_held;
  t->recv_id = t->remote.recv_id;
  if (t->sqe.length > t->remote.length) {
    // Too big for the receive the peer posted: both sides see the error.
    t->status = RDMAD_ERR_INVALID_ARGUMENT;
    t->chunks_total = 0;
    t->result_bytes = 0;
  }
  if (t->chunks_total == 0) {
    t->placed = true;
    progress(*t->flow);
    return;
  }
  p.planning.push_back(t);
}

void FlowEngine::take_post(Peer& p, peer::RecvPost post) {
  if (post.session != p.session) {
    // Advertised in the session before this one (on the control channel while the new one came
    // up): that receive failed with its session.
    refuse_credit(p, "another_session");
    return;
  }
  const auto early = p.posts_early.find(post.seq);
  if (early != p.posts_early.end() && early->second.keys.empty())
    return;  // withdrawn before it came: its number is taken without a credit
  if (post.seq < p.posts_next || early != p.posts_early.end()) {
    counters_.posts_duplicate.fetch_add(1, std::memory_order_relaxed);  // sent again after a lane failed
    return;
  }
  if (post.seq != p.posts_next) {
    // An earlier one is still on its way (another lane, or sent again after its lane failed).
    hold_early(p, std::move(post));
    return;
  }
  add_credit(p, post);
  ++p.posts_next;
  drain_posts(p);
}

void FlowEngine::drain_posts(Peer& p) {
  for (auto it = p.posts_early.begin(); it != p.posts_early.end() && it->first == p.posts_next;
       it = p.posts_early.erase(it)) {
    if (!it->second.keys.empty()) add_credit(p, it->second);
    ++p.posts_next;
  }
}

void FlowEngine::take_cancel(Peer& p, const peer::RecvCancel& c) {
  if (c.session != p.session) return;  // that receive failed with its session, its credit too
  counters_.posts_withdrawn.fetch_add(1, std::memory_order_relaxed);
  if (c.seq < p.posts_next) {
    // Its credit was taken: dropped unless a send has it already (that send fails at the NIC).
    auto it = p.credits.find(ChannelKey{c.owner_uid, c.channel});
    if (it == p.credits.end()) return;
    auto& q = it->second;
    auto r = std::find_if(q.begin(), q.end(), [&](const RemoteRange& x) { return x.recv_id == c.recv_id; });
    if (r == q.end()) return;
    q.erase(r);
    --p.credits_held;
    return;
  }
  if (c.seq == p.posts_next) {
    ++p.posts_next;
    drain_posts(p);
    return;
  }
  // Its advertisement is still on its way (or held): its number goes without a credit.
  auto it = p.posts_early.find(c.seq);
  if (it != p.posts_early.end()) {
    it->second = peer::RecvPost{};
    return;
  }
  peer::RecvPost withdrawn;  // no keys: its number goes without a credit
  withdrawn.seq = c.seq;
  hold_early(p, std::move(withdrawn));
}

void FlowEngine::hold_early(Peer& p, peer::RecvPost post) {
  // Held ones count with the credits: the peer never has more receives advertised to us.
  if (p.posts_early.size() + p.credits_held >= options_.max_receives_per_peer) {
    refuse_credit(p, "max_receives_per_peer");
    return;
  }
  const uint64_t seq = post.seq;
  p.posts_early.emplace(seq, std::move(post));
}

void FlowEngine::refuse_credit(const Peer& p, const char* reason) {
  counters_.credits_refused.fetch_add(1, std::memory_order_relaxed);
  base::log_limited(*flow_log(), g_credit_log, spdlog::level::warn, "receive credit refused peer={} reason={}", p.name,
                    reason);
}

void FlowEngine::add_credit(Peer& p, const peer::RecvPost& post) {
  base::trace::mark(base::trace::Point::kCreditTaken);
  if (p.credits_held >= options_.max_receives_per_peer) {
    // It advertised more receives than we ever would: a misbehaving peer; nothing of ours grows.
    refuse_credit(p, "max_receives_per_peer");
    return;
  }
  ++p.credits_held;
  RemoteRange r;
  r.iova = post.iova;
  r.length = post.length;
  r.rights = RDMAD_ACCESS_REMOTE_WRITE;
  r.recv_id = post.recv_id;
  set_remote_keys(r, post.keys);
  const ChannelKey key{post.owner_uid, post.channel};
  p.credits[key].push_back(r);
  auto& waiting = p.waiting_sends[key];
  if (!waiting.empty()) {
    Transfer* t = waiting.front();
    waiting.pop_front();
    start_send(p, t);
  }
}

bool FlowEngine::send_done(const std::string& name, const peer::SendDone& done) {
  base::trace::mark(base::trace::Point::kDoneArrived);
  Transfer* t = transfer_by_recv_id(done.recv_id);  // none once its flow closed
  if (t == nullptr || t->op != ring::Op::kRecv) return false;
  Flow& f = *t->flow;
  if (f.setup.peer != name || f.setup.channel != done.channel) return false;
  t->unfilled.reset();  // the peer used its credit
  ring::Cqe c{};
  c.wr_id = t->sqe.wr_id;
  c.length = done.status == RDMAD_OK ? std::min<uint64_t>(done.bytes, t->sqe.length) : 0;
  c.status = done.status;
  c.op = t->sqe.op;
  free_transfer(t);
  write_cqe(f, c);
  return true;
}

}  // namespace rdmad::flow
