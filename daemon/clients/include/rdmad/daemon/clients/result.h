// Result type of the client service: base's Result with an Error {status, message}. The status is
// the rdmad_status sent to the client; the message names the failing check or call.
#pragma once

#include <string>

#include "rdmad/base/result.h"
#include "rdmad/rdmad.h"

namespace rdmad::clients {

struct Error {
  rdmad_status status = RDMAD_ERR_SYSTEM;
  std::string message;
};

struct Ok {};

template <class T>
using Result = base::Result<T, Error>;

// Builds an Error whose message carries errno text: "<what>: <strerror(err)>".
Error sys_error(const std::string& what, int err);

}  // namespace rdmad::clients
