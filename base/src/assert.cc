#include "rdmad/base/assert.h"

#include <cstdio>
#include <cstdlib>

#include <spdlog/spdlog.h>

namespace rdmad::base {

void bug(const char* file, int line, const char* condition, const std::string& message) {
  // Straight to stderr as well as through the loggers: the logger may be what broke.
  if (condition != nullptr) {
    std::fprintf(stderr, "bug at %s:%d: assertion \"%s\" failed: %s\n", file, line, condition, message.c_str());
  } else {
    std::fprintf(stderr, "bug at %s:%d: %s\n", file, line, message.c_str());
  }
  std::fflush(stderr);
  spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) { l->flush(); });
  std::abort();
}

}  // namespace rdmad::base
