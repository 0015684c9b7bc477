#include "ids.h"

#include <sys/random.h>

#include <cerrno>

namespace rdmad::verbs::engine {

bool random_bytes(void* out, size_t n) {
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    const ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

}  // namespace rdmad::verbs::engine
