#include "channel.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <thread>

namespace rdmad::vm {
namespace {

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1000));
}

bool make_addr(const std::string& host, int port, sockaddr_in* sa) {
  std::memset(sa, 0, sizeof *sa);
  sa->sin_family = AF_INET;
  sa->sin_port = htons(static_cast<uint16_t>(port));
  return inet_pton(AF_INET, host.c_str(), &sa->sin_addr) == 1;
}

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

Channel& Channel::operator=(Channel&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.fd_;
    buf_ = std::move(o.buf_);
    o.fd_ = -1;
  }
  return *this;
}

Channel::~Channel() {
  if (fd_ >= 0) close(fd_);
}

std::optional<Channel> Channel::connect(const std::string& host, int port, Clock::time_point deadline,
                                        std::string* error) {
  sockaddr_in sa;
  if (!make_addr(host, port, &sa)) {
    *error = "bad address " + host;
    return std::nullopt;
  }
  while (true) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      *error = errno_text("socket");
      return std::nullopt;
    }
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return Channel(fd);
    }
    *error = errno_text(("connect " + host + ":" + std::to_string(port)).c_str());
    close(fd);
    // The listener may not be up yet (or the link not yet resolved): try again until the deadline.
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

bool Channel::send(const std::string& line) {
  std::string out = line + "\n";
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::send(fd_, out.data() + done, out.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::optional<std::string> Channel::receive(Clock::time_point deadline, std::string* error) {
  while (true) {
    if (auto nl = buf_.find('\n'); nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return line;
    }
    pollfd p{fd_, POLLIN, 0};
    const int r = poll(&p, 1, remaining_ms(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      *error = errno_text("poll");
      return std::nullopt;
    }
    if (r == 0) {
      if (Clock::now() >= deadline) {
        *error = "timed out waiting for the peer";
        return std::nullopt;
      }
      continue;
    }
    char chunk[4096];
    const ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = n == 0 ? "the peer closed the channel" : errno_text("recv");
      return std::nullopt;
    }
    buf_.append(chunk, static_cast<size_t>(n));
  }
}

Listener::Listener(const std::string& address, int port, std::string* error) {
  sockaddr_in sa;
  if (!make_addr(address, port, &sa)) {
    *error = "bad address " + address;
    return;
  }
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(fd_, 4) != 0) {
    *error = errno_text(("listen " + address + ":" + std::to_string(port)).c_str());
    close(fd_);
    fd_ = -1;
  }
}

Listener::~Listener() {
  if (fd_ >= 0) close(fd_);
}

std::optional<Channel> Listener::accept(Clock::time_point deadline, std::string* error) {
  while (true) {
    pollfd p{fd_, POLLIN, 0};
    const int r = poll(&p, 1, remaining_ms(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r > 0) {
      int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return Channel(fd);
      }
    }
    if (Clock::now() >= deadline) {
      *error = "no peer connected before the deadline";
      return std::nullopt;
    }
  }
}

std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace rdmad::vm
