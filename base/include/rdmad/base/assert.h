#pragma once
// Broken internal invariants (docs/errors.md). RDMAD_ASSERT(cond, fmt, args...) and
// RDMAD_BUG(fmt, args...) log one critical line naming the file and line, flush every logger and
// abort, in every build type: a daemon that goes on past a broken invariant corrupts memory a NIC
// may be writing. They are for bugs only, never for input from peers, clients, packets or config.
#include <fmt/format.h>

#include <string>

namespace rdmad::base {

[[noreturn]] void bug(const char* file, int line, const char* condition, const std::string& message);

}  // namespace rdmad::base

#define RDMAD_ASSERT(cond, ...)                                                          \
  do {                                                                                   \
    if (!(cond)) [[unlikely]]                                                            \
      ::rdmad::base::bug(__FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__));         \
  } while (false)

#define RDMAD_BUG(...) ::rdmad::base::bug(__FILE__, __LINE__, nullptr, ::fmt::format(__VA_ARGS__))
