// Reading a file that a path in the configuration (or on the command line) names, which can be
// anything: a directory, a FIFO (an open would block), a device (an open can have side effects),
// /dev/zero (a read without end). Shared by the configuration file and the credential files; each
// caller judges the file by its own rules and words its own messages.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <functional>
#include <string>

namespace rdmad::config {

/// What a file that is not a regular one is ("a directory", "a FIFO", ...).
const char* file_type_name(mode_t mode);

struct CarefulRead {
  enum class Outcome { kOk, kSystemError, kRefused, kGrew } outcome = Outcome::kOk;
  int error = 0;       // kSystemError: errno of stat, open, fstat or read
  std::string reason;  // kRefused: what `judge` said
};

/// `judge(st, via_symlink)` returns why the file must not be read ("" to read it). It sees the
/// stat of the path first — so a FIFO or device is refused before anything opens it — and then the
/// fstat of the descriptor actually opened (O_NONBLOCK: a path swapped for a FIFO in between
/// cannot block the open). At most max_bytes + 1 bytes are read, so a file that grows while it is
/// read is refused (kGrew), never followed.
CarefulRead read_carefully(const std::string& path, size_t max_bytes,
                           const std::function<std::string(const struct stat&, bool via_symlink)>& judge,
                           std::string* text);

}  // namespace rdmad::config
