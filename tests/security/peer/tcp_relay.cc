#include "tcp_relay.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace rdmad::peer::test {
namespace {

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return a;
}

}  // namespace

TcpRelay::TcpRelay(uint16_t target_port) : target_(target_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = loopback(0);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(listen_fd_, 64) != 0 ||
      ::pipe(wake_) != 0) {
    throw std::runtime_error("relay: cannot listen");
  }
  socklen_t len = sizeof(a);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  thread_ = std::thread([this] { run(); });
}

TcpRelay::~TcpRelay() {
  const char x = 0;
  (void)!::write(wake_[1], &x, 1);
  thread_.join();
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

std::vector<TcpRelay::Recorded> TcpRelay::connections() const {
  std::lock_guard lock(mu_);
  return recorded_;
}

std::string TcpRelay::everything() const {
  std::lock_guard lock(mu_);
  std::string all;
  for (const Recorded& r : recorded_) all += r.to_server + r.to_client;
  return all;
}

void TcpRelay::run() {
  std::vector<Pipe> pipes;
  char buf[65536];
  for (;;) {
    std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const Pipe& p : pipes) {
      fds.push_back({p.client, POLLIN, 0});
      fds.push_back({p.server, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) continue;
    if (fds[0].revents != 0) break;
    if (fds[1].revents & POLLIN) {
      const int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) {
        const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in t = loopback(target_);
        if (::connect(s, reinterpret_cast<sockaddr*>(&t), sizeof(t)) == 0) {
          std::lock_guard lock(mu_);
          recorded_.emplace_back();
          pipes.push_back({c, s, recorded_.size() - 1});
        } else {
          ::close(s);
          ::close(c);
        }
      }
    }
    std::vector<Pipe> alive;
    for (size_t i = 0; i < pipes.size(); ++i) {
      Pipe& p = pipes[i];
      bool open = true;
      for (int dir = 0; dir < 2 && open; ++dir) {
        const pollfd& f = fds[2 + 2 * i + dir];
        if (f.revents == 0) continue;
        const int from = dir == 0 ? p.client : p.server;
        const int to = dir == 0 ? p.server : p.client;
        const ssize_t n = ::read(from, buf, sizeof(buf));
        if (n <= 0) {
          open = false;
          break;
        }
        {
          std::lock_guard lock(mu_);
          (dir == 0 ? recorded_[p.index].to_server : recorded_[p.index].to_client).append(buf, static_cast<size_t>(n));
        }
        for (ssize_t off = 0; off < n;) {
          const ssize_t w = ::send(to, buf + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
          if (w <= 0) {
            open = false;
            break;
          }
          off += w;
        }
      }
      if (open) {
        alive.push_back(p);
      } else {
        ::close(p.client);
        ::close(p.server);
      }
    }
    pipes = std::move(alive);
  }
  for (const Pipe& p : pipes) {
    ::close(p.client);
    ::close(p.server);
  }
}

}  // namespace rdmad::peer::test
