#pragma once
// Does a device register dma-buf memory (GPU memory exported by CUDA)? The probe NCCL and UCX use:
// ibv_reg_dmabuf_mr with fd = -1. EBADF means the whole path (library, provider, kernel ≥ 5.12) is
// there and only the fd was bad; EOPNOTSUPP / EPROTONOSUPPORT mean it is not.
#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace rdmad::verbs::rdma_core {

enum class DmabufSupport : uint8_t { kSupported, kNotSupported, kUnknown };

struct DmabufProbe {
  DmabufSupport support = DmabufSupport::kUnknown;
  int err = 0;
  std::string detail;  // the exact reason, for the start-up log
};

// Classifies the outcome of the fd = -1 call: `mr_created` if it (unexpectedly) returned an MR, else
// the errno it left.
DmabufProbe classify_dmabuf_probe(bool mr_created, int err);

// Runs the probe on `pd` of `device`.
DmabufProbe probe_dmabuf(ibv_pd* pd, std::string_view device);

}  // namespace rdmad::verbs::rdma_core
