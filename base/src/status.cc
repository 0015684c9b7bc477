#include "rdmad/base/status.h"

namespace rdmad::base {

std::string_view to_string(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInProgress:
      return "in-progress";
    case StatusCode::kNoResource:
      return "no-resource";
    case StatusCode::kNotSupported:
      return "not-supported";
    case StatusCode::kError:
      return "error";
  }
  return "unknown";
}

}  // namespace rdmad::base
