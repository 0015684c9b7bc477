#include "rdmad/daemon/clients/result.h"

#include <cstring>

namespace rdmad::clients {

Error sys_error(const std::string& what, int err) {
  rdmad_status status = (err == ENOMEM || err == EMFILE || err == ENFILE || err == EAGAIN)
                            ? RDMAD_ERR_NO_RESOURCE
                            : RDMAD_ERR_SYSTEM;
  return Error{status, what + ": " + std::strerror(err)};
}

}  // namespace rdmad::clients
