// Datapath of the rdma_core backend: batched ibv_poll_cq, chained ibv_post_send / ibv_post_recv
// built on the stack (no allocation per post), and the QP state machine through ibv_modify_qp.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rc_objects.h"
#include "device_discovery.h"

namespace rdmad::verbs::rdma_core {

namespace {

constexpr size_t kPollBatch = 64;
constexpr size_t kPostChunk = 32;

// Moves a split region's SGE onto its slices (see split_keys.h); unchanged for any other lkey.
inline void translate_split(const SplitKeyTable& table, ibv_sge* sges, int& num_sge) {
  if (num_sge == 0) return;
  if (const SplitKeys* keys = table.find(sges[0].lkey); keys != nullptr) {
    const size_t n = translate_sge(*keys, sges[0].addr, sges[0].length, sges);
    if (n > 0) num_sge = static_cast<int>(n);
  }
}

Status post_failure(const char* verb, uint32_t qpn, int rc, size_t done, size_t* posted) {
  if (posted != nullptr) *posted = done;
  if (rc == ENOMEM) return Status::no_resource(fmt::format("{} on qp 0x{:x}: queue full", verb, qpn));
  return Status::error(fmt::format("{} on qp 0x{:x}: {}", verb, qpn, std::strerror(rc)));
}

}  // namespace

size_t RcCompletionQueue::poll(std::span<WorkCompletion> out) {
  ibv_wc wc[kPollBatch];
  size_t total = 0;
  while (total < out.size()) {
    const int want = static_cast<int>(std::min(kPollBatch, out.size() - total));
    const int n = ibv_poll_cq(cq_.get(), want, wc);
    if (n <= 0) break;  // empty, or a CQ error the async event reports
    for (int i = 0; i < n; ++i) to_work_completion(wc[i], out[total + static_cast<size_t>(i)]);
    total += static_cast<size_t>(n);
    if (n < want) break;
  }
  return total;
}

Status RcCompletionQueue::request_notify() {
  if (!channel_) return Status::not_supported("completion notification: no completion channel");
  const int rc = ibv_req_notify_cq(cq_.get(), 0);
  if (rc != 0) return Status::error(fmt::format("ibv_req_notify_cq: {}", std::strerror(rc)));
  return Status::success();
}

void RcCompletionQueue::ack_notify() {
  if (!channel_) return;
  // The channel is non-blocking: take every pending event, and acknowledge them at once (a CQ
  // with unacknowledged events cannot be destroyed).
  unsigned n = 0;
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  while (ibv_get_cq_event(channel_->get(), &cq, &ctx) == 0) ++n;
  if (n > 0) ibv_ack_cq_events(cq_.get(), n);
}

RcQueuePair::RcQueuePair(std::shared_ptr<DeviceState> state, rdma_core::QueuePair qp,
                         std::shared_ptr<SplitKeyTable> split, QpCap cap)
    : state_(std::move(state)), qp_(std::move(qp)), split_(std::move(split)) {
  attr_.cap = cap;
}

Status RcQueuePair::modify(const QpAttr& attr, uint32_t mask) {
  std::lock_guard lock(attr_mu_);
  PathConfig path;
  if (mask & kQpAv) {
    auto p = state_->path_config();
    if (!p.ok()) return p.status();
    path = p.value();
    path.dlid = attr.dest_lid;
    if (!path.roce && path.dlid == 0) {
      return Status::error(fmt::format("qp 0x{:x}: InfiniBand port needs QpAttr::dest_lid (the peer's LID)", qp_num()));
    }
  }
  const auto t = to_ibv_qp_attr(attr, mask, path);
  if (!t)
    return Status::error(
        fmt::format("qp 0x{:x}: path mtu {} is not 256..4096", qp_num(), attr.path_mtu_bytes));
  if (mask & kQpPathMtu) {
    // ib_core and rxe accept any path MTU up to the port's max_mtu, but no packet longer than the
    // link's can leave: rxe then retries the first one forever (IP DF, IpFragFails) and the WR never
    // completes, not even with an error. Refuse it here, where the caller still hears why.
    ibv_port_attr port{};
    if (ibv_query_port(state_->ctx.get(), state_->config.port, &port) == 0) {
      const uint32_t active = mtu_bytes(port.active_mtu);
      if (active != 0 && attr.path_mtu_bytes > active) {
        return Status::error(fmt::format("qp 0x{:x}: path mtu {} is above the active mtu {} of {} port {}", qp_num(),
                                         attr.path_mtu_bytes, active, state_->sysfs.name, state_->config.port));
      }
    }
  }
  auto r = qp_.modify(t->attr, t->mask);
  if (!r) return Status::error(r.error().message());
  merge_qp_attr(attr, mask, attr_);
  qp_state_.store(attr_.state, std::memory_order_release);
  return Status::success();
}

QpAttr RcQueuePair::query() const {
  std::lock_guard lock(attr_mu_);
  QpAttr out = attr_;
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  // The NIC moves a QP to ERR on its own (transport errors): ask it.
  if (ibv_query_qp(qp_.get(), &a, IBV_QP_STATE, &ia) == 0) out.state = from_ibv_state(a.qp_state);
  return out;
}

Status RcQueuePair::post_send(std::span<const SendWr> wrs, size_t* posted) {
  const QpState st = qp_state_.load(std::memory_order_acquire);
  if (st != QpState::kRts && st != QpState::kError) {
    if (posted != nullptr) *posted = 0;
    return Status::error(fmt::format("post_send on qp 0x{:x} in {}", qp_num(), to_string(st)));
  }
  ibv_send_wr wr[kPostChunk];
  ibv_sge sge[kPostChunk][kMaxSgePieces];
  for (size_t base = 0; base < wrs.size(); base += kPostChunk) {
    const size_t n = std::min(kPostChunk, wrs.size() - base);
    for (size_t i = 0; i < n; ++i) {
      to_ibv_send_wr(wrs[base + i], wr[i], sge[i][0]);
      translate_split(*split_, sge[i], wr[i].num_sge);
      wr[i].next = i + 1 < n ? &wr[i + 1] : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    if (const int rc = ibv_post_send(qp_.get(), wr, &bad); rc != 0) {
      const size_t ok = bad != nullptr ? static_cast<size_t>(bad - wr) : 0;
      return post_failure("ibv_post_send", qp_num(), rc, base + ok, posted);
    }
  }
  if (posted != nullptr) *posted = wrs.size();
  return Status::success();
}

Status RcQueuePair::post_recv(std::span<const RecvWr> wrs, size_t* posted) {
  if (qp_state_.load(std::memory_order_acquire) == QpState::kReset) {
    if (posted != nullptr) *posted = 0;
    return Status::error(fmt::format("post_recv on qp 0x{:x} in RESET", qp_num()));
  }
  ibv_recv_wr wr[kPostChunk];
  ibv_sge sge[kPostChunk][kMaxSgePieces];
  for (size_t base = 0; base < wrs.size(); base += kPostChunk) {
    const size_t n = std::min(kPostChunk, wrs.size() - base);
    for (size_t i = 0; i < n; ++i) {
      to_ibv_recv_wr(wrs[base + i], wr[i], sge[i][0]);
      translate_split(*split_, sge[i], wr[i].num_sge);
      wr[i].next = i + 1 < n ? &wr[i + 1] : nullptr;
    }
    ibv_recv_wr* bad = nullptr;
    if (const int rc = ibv_post_recv(qp_.get(), wr, &bad); rc != 0) {
      const size_t ok = bad != nullptr ? static_cast<size_t>(bad - wr) : 0;
      return post_failure("ibv_post_recv", qp_num(), rc, base + ok, posted);
    }
  }
  if (posted != nullptr) *posted = wrs.size();
  return Status::success();
}

}  // namespace rdmad::verbs::rdma_core
