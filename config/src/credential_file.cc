#include "rdmad/config/credential_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace rdmad::config {
namespace {

const char* type_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

// What is wrong with the file `st` describes, or "".
std::string judge(const struct stat& st, CredentialKind kind) {
  if (!S_ISREG(st.st_mode)) return fmt::format("is {}, not a regular file", type_of(st.st_mode));
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    return fmt::format("is owned by uid {}, not by root or the daemon's uid {}", st.st_uid, geteuid());
  }
  const unsigned mode = st.st_mode & 07777;
  if (kind == CredentialKind::kSecret && (mode & 077) != 0) {
    return fmt::format("is accessible by group or others (mode {:04o}); a secret must be private: chmod 600 it", mode);
  }
  if ((mode & 022) != 0) {
    return fmt::format("is writable by group or others (mode {:04o}): chmod go-w it", mode);
  }
  if (st.st_size <= 0) return "is empty";
  if (static_cast<uint64_t>(st.st_size) > kMaxCredentialFileBytes) {
    return fmt::format("holds {} bytes, more than the {} a credential file may have", st.st_size,
                       kMaxCredentialFileBytes);
  }
  return "";
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::optional<std::string> read_credential_file(const std::string& path, CredentialKind kind, const std::string& what,
                                                std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<std::string> {
    *error = fmt::format("{} {}: {}", what, path, why);
    return std::nullopt;
  };
  struct stat st {};
  // Look before opening: a device or FIFO is never opened at all (opening some has side effects).
  if (::stat(path.c_str(), &st) != 0) return fail(std::strerror(errno));
  struct stat link {};
  const bool is_link = ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
  if (!S_ISREG(st.st_mode)) {
    return fail(fmt::format("is {}{}, not a regular file", is_link ? "a symlink to " : "", type_of(st.st_mode)));
  }
  // O_NONBLOCK: should the path be swapped for a FIFO after the look, the open still returns.
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) return fail(std::strerror(errno));
  if (::fstat(fd.get(), &st) != 0) return fail(std::strerror(errno));
  if (std::string why = judge(st, kind); !why.empty()) return fail(why);
  // Read at most one byte more than allowed: a file that grew since fstat is refused, not slurped.
  std::string out(static_cast<size_t>(st.st_size) + 1, '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd.get(), out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > kMaxCredentialFileBytes || got > static_cast<size_t>(st.st_size)) return fail("grew while it was read");
  out.resize(got);
  if (out.empty()) return fail("is empty");
  return out;
}

FileStamp stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), static_cast<int64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

}  // namespace rdmad::config
