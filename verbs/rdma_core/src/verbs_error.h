#pragma once
// Errors of libibverbs calls, converted at the boundary: which verb, on which device, errno.
#include <string>

#include "rdmad/base/result.h"

namespace rdmad::verbs::rdma_core {

struct VerbsError {
  std::string verb;    // "ibv_alloc_pd"
  std::string device;  // "mlx5_0" (empty before a device is known)
  int err = 0;         // errno
  // "ibv_alloc_pd on mlx5_0: Cannot allocate memory (errno 12)".
  std::string message() const;
};

template <class T>
using VerbsResult = base::Result<T, VerbsError>;

// Builds a VerbsError from the current errno (or `fallback_err` when errno is 0, as some providers
// return NULL without setting it).
VerbsError last_error(std::string verb, std::string device, int fallback_err = 0);

}  // namespace rdmad::verbs::rdma_core
