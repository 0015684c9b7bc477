#pragma once
// What a device can do, established by asking it (ibv_query_device) and by probing (dma-buf
// registration, context import) rather than by provider name, so advertised capabilities match what
// works.
#include <cstdint>
#include <string>

#include "dmabuf_probe.h"
#include "handles.h"

namespace rdmad::verbs::rdma_core {

struct DeviceCaps {
  uint64_t max_mr_size = 0;
  uint32_t max_qp = 0;
  uint32_t max_qp_wr = 0;
  uint32_t max_sge = 0;
  uint32_t max_cq = 0;
  uint32_t max_cqe = 0;
  uint32_t max_mr = 0;
  uint8_t phys_port_cnt = 0;
  uint32_t vendor_id = 0;  // IEEE OUI; 0xffffff is rxe (kRxeVendorId)
  DmabufProbe dmabuf;           // ibv_reg_dmabuf_mr, fd = -1 probe
  bool import_context = false;  // ibv_import_device works (mlx5): contexts can be shared with clients
  std::string import_detail;
};

// Queries and probes `ctx` (the PD is used for the dma-buf probe).
VerbsResult<DeviceCaps> query_caps(const Context& ctx, const ProtectionDomain& pd);

}  // namespace rdmad::verbs::rdma_core
