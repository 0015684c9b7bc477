#include "rdmad/base/log.h"
#include "handles.h"

#include "rdmad/base/log_fields.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

namespace rdmad::verbs::rdma_core {

std::string VerbsError::message() const {
  const std::string where = device.empty() ? verb : fmt::format("{} on {}", verb, device);
  return fmt::format("{}: {} (errno {})", where, std::strerror(err), err);
}

VerbsError last_error(std::string verb, std::string device, int fallback_err) {
  const int e = errno != 0 ? errno : fallback_err;
  return VerbsError{std::move(verb), std::move(device), e != 0 ? e : EIO};
}

namespace detail {

void log_destroy_failure(const char* verb, const std::string& device, int rc, int saved_errno) {
  // Destroy verbs return the errno value; ibv_close_device returns -1 and sets errno.
  const int e = rc > 0 ? rc : (saved_errno != 0 ? saved_errno : EIO);
  auto log = log::get(log::Component::kVerbs);
  log->error("verbs call failed call={} device={} error={}", verb, device, rdmad::base::q(std::strerror(e)));
}

}  // namespace detail

namespace {

template <class T>
VerbsResult<T> fail(const char* verb, const std::string& device) {
  return last_error(verb, device, ENOMEM);
}

}  // namespace

VerbsResult<Context> Context::open(ibv_device* device) {
  const std::string name = device != nullptr ? ibv_get_device_name(device) : "";
  errno = 0;
  ibv_context* raw = device != nullptr ? ibv_open_device(device) : nullptr;
  if (raw == nullptr) return fail<Context>("ibv_open_device", name);
  return Context(detail::adopt(raw, &ibv_close_device, "ibv_close_device", name), name);
}

VerbsResult<ProtectionDomain> ProtectionDomain::allocate(const Context& ctx) {
  errno = 0;
  ibv_pd* raw = ibv_alloc_pd(ctx.get());
  if (raw == nullptr) return fail<ProtectionDomain>("ibv_alloc_pd", ctx.device());
  return ProtectionDomain(detail::adopt(raw, &ibv_dealloc_pd, "ibv_dealloc_pd", ctx.device(), {ctx.anchor()}),
                          ctx.device());
}

VerbsResult<MemoryRegion> MemoryRegion::register_host(const ProtectionDomain& pd, void* addr, size_t length,
                                                      int access) {
  errno = 0;
  ibv_mr* raw = ibv_reg_mr(pd.get(), addr, length, access);
  if (raw == nullptr) return fail<MemoryRegion>("ibv_reg_mr", pd.device());
  return MemoryRegion(detail::adopt(raw, &ibv_dereg_mr, "ibv_dereg_mr", pd.device(), {pd.anchor()}),
                      pd.device());
}

VerbsResult<MemoryRegion> MemoryRegion::register_dmabuf(const ProtectionDomain& pd, uint64_t offset,
                                                        size_t length, uint64_t iova, int fd, int access) {
  errno = 0;
  ibv_mr* raw = ibv_reg_dmabuf_mr(pd.get(), offset, length, iova, fd, access);
  if (raw == nullptr) return fail<MemoryRegion>("ibv_reg_dmabuf_mr", pd.device());
  return MemoryRegion(detail::adopt(raw, &ibv_dereg_mr, "ibv_dereg_mr", pd.device(), {pd.anchor()}),
                      pd.device());
}

VerbsResult<CompletionChannel> CompletionChannel::create(const Context& ctx) {
  errno = 0;
  ibv_comp_channel* raw = ibv_create_comp_channel(ctx.get());
  if (raw == nullptr) return fail<CompletionChannel>("ibv_create_comp_channel", ctx.device());
  return CompletionChannel(
      detail::adopt(raw, &ibv_destroy_comp_channel, "ibv_destroy_comp_channel", ctx.device(), {ctx.anchor()}),
      ctx.device());
}

VerbsResult<CompletionQueue> CompletionQueue::create(const Context& ctx, int cqe,
                                                     const CompletionChannel* channel, int comp_vector) {
  errno = 0;
  ibv_comp_channel* ch = channel != nullptr ? channel->get() : nullptr;
  ibv_cq* raw = ibv_create_cq(ctx.get(), cqe, nullptr, ch, comp_vector);
  if (raw == nullptr) return fail<CompletionQueue>("ibv_create_cq", ctx.device());
  // A CQ attached to a channel must be destroyed before the channel.
  return CompletionQueue(detail::adopt(raw, &ibv_destroy_cq, "ibv_destroy_cq", ctx.device(),
                                       {ctx.anchor(), channel != nullptr ? channel->anchor() : nullptr}),
                         ctx.device());
}

VerbsResult<QueuePair> QueuePair::create(const ProtectionDomain& pd, const CompletionQueue& send_cq,
                                         const CompletionQueue& recv_cq, ibv_qp_init_attr attr) {
  attr.send_cq = send_cq.get();
  attr.recv_cq = recv_cq.get();
  errno = 0;
  ibv_qp* raw = ibv_create_qp(pd.get(), &attr);
  if (raw == nullptr) return fail<QueuePair>("ibv_create_qp", pd.device());
  return QueuePair(detail::adopt(raw, &ibv_destroy_qp, "ibv_destroy_qp", pd.device(),
                                 {pd.anchor(), send_cq.anchor(), recv_cq.anchor()}),
                   pd.device());
}

VerbsResult<bool> QueuePair::modify(ibv_qp_attr attr, int mask) const {
  if (const int rc = ibv_modify_qp(get(), &attr, mask); rc != 0) {
    return VerbsError{fmt::format("ibv_modify_qp(qpn 0x{:x})", qp_num()), device(), rc > 0 ? rc : errno};
  }
  return true;
}

}  // namespace rdmad::verbs::rdma_core
