#include "device_caps.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rdmad::verbs::rdma_core {

namespace {

// Imports a duplicate of our own command fd: the same call a client-shared context would use.
void probe_import(const Context& ctx, DeviceCaps& caps) {
  const int fd = ::dup(ctx.get()->cmd_fd);
  if (fd < 0) {
    caps.import_detail = fmt::format("dup(cmd_fd): {}", std::strerror(errno));
    return;
  }
  errno = 0;
  ibv_context* imported = ibv_import_device(fd);
  if (imported == nullptr) {
    const int err = errno != 0 ? errno : EOPNOTSUPP;
    ::close(fd);
    caps.import_detail = fmt::format("ibv_import_device: {}", std::strerror(err));
    return;
  }
  caps.import_context = true;
  caps.import_detail = "ibv_import_device works";
  ibv_close_device(imported);  // closes fd too
}

}  // namespace

VerbsResult<DeviceCaps> query_caps(const Context& ctx, const ProtectionDomain& pd) {
  ibv_device_attr attr{};
  if (const int rc = ibv_query_device(ctx.get(), &attr); rc != 0) {
    return VerbsError{"ibv_query_device", ctx.device(), rc > 0 ? rc : errno};
  }
  DeviceCaps caps;
  caps.max_mr_size = attr.max_mr_size;
  caps.max_qp = static_cast<uint32_t>(attr.max_qp);
  caps.max_qp_wr = static_cast<uint32_t>(attr.max_qp_wr);
  caps.max_sge = static_cast<uint32_t>(attr.max_sge);
  caps.max_cq = static_cast<uint32_t>(attr.max_cq);
  caps.max_cqe = static_cast<uint32_t>(attr.max_cqe);
  caps.max_mr = static_cast<uint32_t>(attr.max_mr);
  caps.phys_port_cnt = attr.phys_port_cnt;
  caps.vendor_id = attr.vendor_id;
  caps.dmabuf = probe_dmabuf(pd.get(), ctx.device());
  probe_import(ctx, caps);
  return caps;
}

}  // namespace rdmad::verbs::rdma_core
