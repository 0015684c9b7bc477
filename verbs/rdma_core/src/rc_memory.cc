// Memory registration of the rdma_core backend: host memory (split into ≤ 3.5 GiB MRs behind one
// handle) and dma-buf memory; QP creation.
#include <fmt/format.h>

#include <algorithm>

#include "rc_objects.h"
#include "mr_split.h"

namespace rdmad::verbs::rdma_core {

RcMemoryRegion::RcMemoryRegion(std::vector<rdma_core::MemoryRegion> slices, SplitKeys keys, uint32_t access,
                               std::shared_ptr<SplitKeyTable> table)
    : slices_(std::move(slices)), keys_(keys), access_(access), table_(std::move(table)) {}

RcMemoryRegion::~RcMemoryRegion() {
  // Unpublish before the MRs go, so no post translates onto a dead key.
  if (table_) table_->remove(keys_.lkeys[0]);
}

std::optional<RemoteSlices> RcMemoryRegion::remote_slices() const {
  if (keys_.count <= 1) return std::nullopt;
  RemoteSlices s;
  s.slice_bytes = keys_.slice_bytes;
  s.rkeys.assign(keys_.rkeys.begin(), keys_.rkeys.begin() + static_cast<std::ptrdiff_t>(keys_.count));
  return s;
}

RcProtectionDomain::RcProtectionDomain(std::shared_ptr<DeviceState> state, rdma_core::ProtectionDomain pd)
    : state_(std::move(state)), pd_(std::move(pd)), split_(std::make_shared<SplitKeyTable>()) {}

Result<std::unique_ptr<verbs::MemoryRegion>> RcProtectionDomain::reg_mr(void* addr, size_t length,
                                                                        uint32_t access) {
  const auto plan = plan_mr_slices(length);
  if (plan.empty()) return Status::error(fmt::format("reg_mr of 0 bytes on {}", pd_.device()));
  if (plan.size() > kMaxSlices) {
    return Status::no_resource(fmt::format("reg_mr of {} bytes on {}: more than {} slices of {} bytes",
                                           length, pd_.device(), kMaxSlices, kMaxMrSliceBytes));
  }
  SplitKeys keys;
  keys.addr = reinterpret_cast<uint64_t>(addr);
  keys.length = length;
  keys.count = plan.size();
  std::vector<rdma_core::MemoryRegion> slices;
  slices.reserve(plan.size());
  for (const MrSlice& s : plan) {
    auto mr = rdma_core::MemoryRegion::register_host(pd_, static_cast<uint8_t*>(addr) + s.offset, s.length,
                                                     to_ibv_access(access));
    if (!mr) return status_from_errno(mr.error().err, mr.error().message());
    keys.lkeys[slices.size()] = mr->lkey();
    keys.rkeys[slices.size()] = mr->rkey();
    slices.push_back(std::move(mr.value()));
  }
  std::shared_ptr<SplitKeyTable> table;
  if (slices.size() > 1) {
    if (!split_->add(keys)) {
      return Status::no_resource(fmt::format("{} split regions already registered on this PD of {}",
                                             SplitKeyTable::kCapacity, pd_.device()));
    }
    table = split_;
  }
  return std::unique_ptr<verbs::MemoryRegion>(
      new RcMemoryRegion(std::move(slices), keys, access, std::move(table)));
}

Result<std::unique_ptr<verbs::MemoryRegion>> RcProtectionDomain::reg_dmabuf_mr(int fd, uint64_t offset,
                                                                               size_t length, uint64_t iova,
                                                                               uint32_t access) {
  if (state_->caps.dmabuf.support != DmabufSupport::kSupported) {
    return Status::not_supported(
        fmt::format("{}: dma-buf registration: {}", pd_.device(), state_->caps.dmabuf.detail));
  }
  auto mr = rdma_core::MemoryRegion::register_dmabuf(pd_, offset, length, iova, fd, to_ibv_access(access));
  if (!mr) return status_from_errno(mr.error().err, mr.error().message());
  SplitKeys keys;
  keys.addr = iova;
  keys.length = length;
  keys.count = 1;
  keys.slice_bytes = length;
  keys.lkeys[0] = mr->lkey();
  keys.rkeys[0] = mr->rkey();
  std::vector<rdma_core::MemoryRegion> one;
  one.push_back(std::move(mr.value()));
  return std::unique_ptr<verbs::MemoryRegion>(new RcMemoryRegion(std::move(one), keys, access, nullptr));
}

Result<std::unique_ptr<verbs::QueuePair>> RcProtectionDomain::create_qp(const QpInitAttr& attr) {
  const auto* scq = dynamic_cast<const RcCompletionQueue*>(attr.send_cq);
  const auto* rcq = dynamic_cast<const RcCompletionQueue*>(attr.recv_cq);
  if (scq == nullptr || rcq == nullptr) {
    return Status::error("create_qp: completion queues must come from the same rdma_core device");
  }
  const DeviceCaps& caps = state_->caps;
  if (attr.max_send_wr == 0 || attr.max_send_wr > caps.max_qp_wr || attr.max_recv_wr > caps.max_qp_wr) {
    return Status::error(fmt::format("create_qp: queue depths {}/{} outside 1..{} on {}", attr.max_send_wr,
                                     attr.max_recv_wr, caps.max_qp_wr, pd_.device()));
  }
  ibv_qp_init_attr ia{};
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = attr.max_send_wr;
  ia.cap.max_recv_wr = std::max<uint32_t>(attr.max_recv_wr, 1);
  // A split region's SGE can become up to kMaxSgePieces ibv_sges.
  ia.cap.max_send_sge = std::min<uint32_t>(kMaxSgePieces, caps.max_sge);
  ia.cap.max_recv_sge = std::min<uint32_t>(kMaxSgePieces, caps.max_sge);
  ia.sq_sig_all = 0;
  auto qp = rdma_core::QueuePair::create(pd_, scq->handle(), rcq->handle(), ia);
  if (!qp) return status_from_errno(qp.error().err, qp.error().message());
  // The device may make the queues deeper than asked (rxe rounds each up to a power of two and
  // keeps one slot free: 256 becomes 511); what it really holds is what the QP reports.
  ibv_qp_attr now{};
  ibv_qp_init_attr real{};
  QpCap cap{attr.max_send_wr, ia.cap.max_recv_wr};
  if (ibv_query_qp(qp.value().get(), &now, IBV_QP_CAP, &real) == 0) {
    cap = {real.cap.max_send_wr, real.cap.max_recv_wr};
  }
  return std::unique_ptr<verbs::QueuePair>(new RcQueuePair(state_, std::move(qp.value()), split_, cap));
}

}  // namespace rdmad::verbs::rdma_core
