#include "support/fd_store.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace rdmad::test {
namespace {

// The value of `key=` in a newline-separated notification, or "".
std::string field(const std::string& msg, const std::string& key) {
  size_t at = 0;
  while (at <= msg.size()) {
    size_t end = msg.find('\n', at);
    if (end == std::string::npos) end = msg.size();
    const std::string line = msg.substr(at, end - at);
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
    at = end + 1;
  }
  return "";
}

bool same_file(int a, int b) {
  struct stat sa {}, sb {};
  return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace

FakeFdStore::FakeFdStore(std::string path) : path_(std::move(path)) {
  fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path_.c_str());
  unlink(path_.c_str());
  if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) std::perror("FakeFdStore bind");
  int big = 8 << 20;
  setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
  if (pipe2(stop_, O_CLOEXEC) != 0) std::perror("FakeFdStore pipe2");
  thread_ = std::thread([this] { run(); });
}

FakeFdStore::~FakeFdStore() {
  if (write(stop_[1], "x", 1) != 1) std::perror("FakeFdStore stop");
  thread_.join();
  close(stop_[0]);
  close(stop_[1]);
  close(fd_);
  unlink(path_.c_str());
  for (auto& [name, fd] : kept_) close(fd);
}

void FakeFdStore::run() {
  for (;;) {
    pollfd p[2] = {{fd_, POLLIN, 0}, {stop_[0], POLLIN, 0}};
    if (poll(p, 2, -1) < 0) continue;
    if (p[1].revents != 0) return;
    char buf[4096];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 253)];
    iovec iov{buf, sizeof buf};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0) continue;
    std::vector<int> fds;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds.push_back(fd);
      }
    }
    const std::string text(buf, static_cast<size_t>(n));
    std::lock_guard lock(mu_);
    messages_.push_back(text);
    const std::string name = field(text, "FDNAME").empty() ? "stored" : field(text, "FDNAME");
    if (field(text, "FDSTORE") == "1") {
      for (int fd : fds) {
        // systemd keeps a file only once, whatever name it came under the second time.
        bool known = false;
        for (const auto& [n2, f2] : kept_) known = known || same_file(fd, f2);
        if (known)
          close(fd);
        else
          kept_.emplace(name, fd);
      }
      continue;
    }
    for (int fd : fds) close(fd);
    if (field(text, "FDSTOREREMOVE") == "1") {
      auto [lo, hi] = kept_.equal_range(name);
      for (auto it = lo; it != hi; ++it) close(it->second);
      kept_.erase(lo, hi);
    }
  }
}

std::vector<int> FakeFdStore::listen_fds() const {
  std::lock_guard lock(mu_);
  std::vector<int> out;
  for (const auto& [name, fd] : kept_) out.push_back(fd);
  return out;
}

std::string FakeFdStore::listen_fdnames_env() const {
  std::lock_guard lock(mu_);
  std::string names;
  for (const auto& [name, fd] : kept_) names += (names.empty() ? "" : ":") + name;
  return "LISTEN_FDNAMES=" + names;
}

size_t FakeFdStore::kept() const {
  std::lock_guard lock(mu_);
  return kept_.size();
}

size_t FakeFdStore::messages_containing(const std::string& needle) const {
  std::lock_guard lock(mu_);
  size_t c = 0;
  for (const auto& m : messages_) c += m.find(needle) != std::string::npos;
  return c;
}

bool FakeFdStore::wait_kept(size_t n, std::chrono::milliseconds deadline) const {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (kept() != n) {
    if (std::chrono::steady_clock::now() >= end) return false;
    usleep(5'000);
  }
  return true;
}

bool FakeFdStore::wait_message(const std::string& needle, std::chrono::milliseconds deadline) const {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (messages_containing(needle) == 0) {
    if (std::chrono::steady_clock::now() >= end) return false;
    usleep(5'000);
  }
  return true;
}

}  // namespace rdmad::test
