// register_builtin_backends: every backend of this binary, in the order `[[nic]] backend` lists them.
#include "rdmad/verbs/registry.h"
#include "rdmad/verbs/rdma_core/rdma_core_backend.h"
#include "rdmad/verbs/soft/soft_backend.h"

namespace rdmad::verbs {

void register_builtin_backends(BackendRegistry& registry) {
  soft::register_backend(registry);
  rdma_core::register_backend(registry);
}

}  // namespace rdmad::verbs
