#include "careful_read.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

namespace rdmad::config {

const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

CarefulRead read_carefully(const std::string& path, size_t max_bytes,
                           const std::function<std::string(const struct stat&, bool via_symlink)>& judge,
                           std::string* text) {
  text->clear();
  auto system_error = [](int e) { return CarefulRead{CarefulRead::Outcome::kSystemError, e, {}}; };
  auto refused = [](std::string why) { return CarefulRead{CarefulRead::Outcome::kRefused, 0, std::move(why)}; };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return system_error(errno);
  struct stat link {};
  const bool via_symlink = ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
  if (std::string why = judge(st, via_symlink); !why.empty()) return refused(std::move(why));
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return system_error(errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::fstat(fd, &st) != 0) return system_error(errno);
  if (std::string why = judge(st, via_symlink); !why.empty()) return refused(std::move(why));
  text->resize(std::min<uint64_t>(static_cast<uint64_t>(st.st_size), max_bytes) + 1);
  size_t got = 0;
  for (;;) {
    if (got == text->size()) {
      if (got > max_bytes) {
        text->clear();
        return CarefulRead{CarefulRead::Outcome::kGrew, 0, {}};
      }
      text->resize(std::min(text->size() * 2, max_bytes + 1));
    }
    const ssize_t n = ::read(fd, text->data() + got, text->size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      text->clear();
      return system_error(e);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text->resize(got);
  return {};
}

}  // namespace rdmad::config
