#include "dmabuf_probe.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace rdmad::verbs::rdma_core {

DmabufProbe classify_dmabuf_probe(bool mr_created, int err) {
  if (mr_created) return {DmabufSupport::kSupported, 0, "ibv_reg_dmabuf_mr accepted fd -1"};
  switch (err) {
    case EBADF:
      return {DmabufSupport::kSupported, err, "dma-buf registration supported (probe got EBADF)"};
    case EOPNOTSUPP:
    case EPROTONOSUPPORT:
      return {DmabufSupport::kNotSupported, err,
              fmt::format("dma-buf registration not supported by the provider or kernel (< 5.12?): {}",
                          std::strerror(err))};
    default:
      return {DmabufSupport::kUnknown, err,
              fmt::format("dma-buf probe inconclusive: {}", std::strerror(err))};
  }
}

DmabufProbe probe_dmabuf(ibv_pd* pd, std::string_view device) {
  errno = 0;
  ibv_mr* mr = ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE);
  const int err = errno;
  if (mr != nullptr) ibv_dereg_mr(mr);
  DmabufProbe p = classify_dmabuf_probe(mr != nullptr, err);
  p.detail = fmt::format("{}: {}", device, p.detail);
  return p;
}

}  // namespace rdmad::verbs::rdma_core
