#pragma once
// Move-only owners of libibverbs handles. Teardown order is part of the types: every owner keeps its
// parents alive, so the release order is always QP → CQ → completion channel → MR → PD → context,
// whatever order the owners are destroyed in (pyverbs' parent-tracks-children). Releasing never throws;
// a failed destroy is logged with the verb, device and errno text.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "verbs_error.h"

namespace rdmad::verbs::rdma_core {

namespace detail {

// Logs a failed destroy verb (rc as the verb returned it: errno value or -1 with errno set).
void log_destroy_failure(const char* verb, const std::string& device, int rc, int saved_errno);

// Takes ownership of `raw`: `destroy(raw)` runs once the last reference goes away, and only then
// are `parents` released. Public for the teardown-order tests.
template <class T>
std::shared_ptr<T> adopt(T* raw, int (*destroy)(T*), const char* verb, std::string device,
                         std::initializer_list<std::shared_ptr<const void>> parents = {}) {
  return std::shared_ptr<T>(raw, [destroy, verb, device = std::move(device),
                                  keep = std::vector<std::shared_ptr<const void>>(parents)](T* p) mutable {
    errno = 0;
    if (const int rc = destroy(p); rc != 0) log_destroy_failure(verb, device, rc, errno);
    // Parents go only after the child is gone, newest first.
    while (!keep.empty()) keep.pop_back();
  });
}

}  // namespace detail

// Common shape of every owner: move-only, null after a move, knows its device for messages.
template <class T>
class Handle {
 public:
  Handle() = default;
  Handle(std::shared_ptr<T> h, std::string device) : h_(std::move(h)), device_(std::move(device)) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& o) noexcept : h_(std::move(o.h_)), device_(std::move(o.device_)) {}
  Handle& operator=(Handle&& o) noexcept {
    h_ = std::move(o.h_);
    device_ = std::move(o.device_);
    return *this;
  }
  ~Handle() = default;

  T* get() const { return h_.get(); }
  explicit operator bool() const { return h_ != nullptr; }
  const std::string& device() const { return device_; }
  // A reference that keeps the handle (and so its parents) alive: children hold one.
  std::shared_ptr<const void> anchor() const { return h_; }
  // Releases now (destroy verb runs once no child holds an anchor).
  void reset() { h_.reset(); }

 private:
  std::shared_ptr<T> h_;
  std::string device_;
};

class Context : public Handle<ibv_context> {
 public:
  using Handle::Handle;
  // ibv_open_device.
  static VerbsResult<Context> open(ibv_device* device);
};

class ProtectionDomain : public Handle<ibv_pd> {
 public:
  using Handle::Handle;
  static VerbsResult<ProtectionDomain> allocate(const Context& ctx);
};

class MemoryRegion : public Handle<ibv_mr> {
 public:
  using Handle::Handle;
  // ibv_reg_mr on host (or peer-mapped) memory.
  static VerbsResult<MemoryRegion> register_host(const ProtectionDomain& pd, void* addr, size_t length,
                                                 int access);
  // ibv_reg_dmabuf_mr: `offset` into the dma-buf `fd`, mapped at `iova`. The fd may be closed afterwards.
  static VerbsResult<MemoryRegion> register_dmabuf(const ProtectionDomain& pd, uint64_t offset, size_t length,
                                                   uint64_t iova, int fd, int access);
  uint32_t lkey() const { return get()->lkey; }
  uint32_t rkey() const { return get()->rkey; }
};

class CompletionChannel : public Handle<ibv_comp_channel> {
 public:
  using Handle::Handle;
  static VerbsResult<CompletionChannel> create(const Context& ctx);
  int fd() const { return get()->fd; }
};

class CompletionQueue : public Handle<ibv_cq> {
 public:
  using Handle::Handle;
  // ibv_create_cq with `cqe` entries; `channel` may be null (polling only).
  static VerbsResult<CompletionQueue> create(const Context& ctx, int cqe, const CompletionChannel* channel,
                                             int comp_vector);
};

class QueuePair : public Handle<ibv_qp> {
 public:
  using Handle::Handle;
  // ibv_create_qp; `attr.send_cq`/`recv_cq` are filled from `send_cq`/`recv_cq`.
  static VerbsResult<QueuePair> create(const ProtectionDomain& pd, const CompletionQueue& send_cq,
                                       const CompletionQueue& recv_cq, ibv_qp_init_attr attr);
  uint32_t qp_num() const { return get()->qp_num; }
  // ibv_modify_qp with a prepared attribute set (see qp_attrs.h).
  VerbsResult<bool> modify(ibv_qp_attr attr, int mask) const;
};

}  // namespace rdmad::verbs::rdma_core
