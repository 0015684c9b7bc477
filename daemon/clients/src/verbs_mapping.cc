#include "rdmad/daemon/clients/verbs_mapping.h"

#include "rdmad/verbs/types.h"

namespace rdmad::clients {

uint32_t to_verbs_access(uint32_t a) {
  uint32_t v = 0;
  if (a & RDMAD_ACCESS_LOCAL_WRITE) v |= verbs::kAccessLocalWrite;
  if (a & RDMAD_ACCESS_REMOTE_WRITE) v |= verbs::kAccessRemoteWrite;
  if (a & RDMAD_ACCESS_REMOTE_READ) v |= verbs::kAccessRemoteRead;
  return v;
}

rdmad_status to_client_status(verbs::StatusCode c) {
  switch (c) {
    case verbs::StatusCode::kNotSupported: return RDMAD_ERR_NOT_SUPPORTED;
    case verbs::StatusCode::kNoResource: return RDMAD_ERR_NO_RESOURCE;
    default: return RDMAD_ERR_SYSTEM;
  }
}

}  // namespace rdmad::clients
