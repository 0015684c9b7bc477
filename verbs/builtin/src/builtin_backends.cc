// register_builtin_backends and builtin_backends: every backend of this binary, in the order
// `[[nic]] backend` lists them.
#include "rdmad/verbs/builtin_backends.h"

#include "rdmad/verbs/rdma_core/rdma_core_backend.h"
#include "rdmad/verbs/registry.h"
#include "rdmad/verbs/soft/soft_backend.h"
// Built where DPDK is (RDMAD_WITH_DPDK): this target then links it and sees its header.
#if __has_include("rdmad/verbs/dpdk/dpdk_backend.h")
#include "rdmad/verbs/dpdk/dpdk_backend.h"
#define RDMAD_HAVE_DPDK_BACKEND 1
#endif

namespace rdmad::verbs {

void register_builtin_backends(BackendRegistry& registry) {
  soft::register_backend(registry);
  rdma_core::register_backend(registry);
#ifdef RDMAD_HAVE_DPDK_BACKEND
  dpdk::register_backend(registry);
#endif
}

const std::vector<BackendDescription>& builtin_backends() {
  static const std::vector<BackendDescription> all = {
      {"soft", soft::static_capabilities(), soft::option_table()},
      {"rdma_core", rdma_core::static_capabilities(), rdma_core::option_table()},
#ifdef RDMAD_HAVE_DPDK_BACKEND
      {"dpdk", dpdk::static_capabilities(), dpdk::option_table()},
#endif
  };
  return all;
}

const BackendDescription& default_builtin_backend() {
  // A [[nic]] that names no backend is a hardware NIC.
  return builtin_backends()[1];
}

const BackendDescription* find_builtin_backend(const std::string& name) {
  for (const BackendDescription& b : builtin_backends())
    if (b.name == name) return &b;
  return nullptr;
}

}  // namespace rdmad::verbs
