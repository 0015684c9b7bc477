#include "connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>

#include "log.h"

namespace rdmad::ipc {
namespace {

// Frames served per wake-up before yielding to other connections.
constexpr int kFramesPerTurn = 64;

class ReceivedFds {
 public:
  ~ReceivedFds() {
    for (size_t i = 0; i < count_; ++i) ::close(fds_[i]);
  }
  void add(int fd) {
    if (count_ < fds_.size()) fds_[count_++] = fd;
    else ::close(fd);
  }
  size_t count() const { return count_; }
  int first() const { return count_ > 0 ? fds_[0] : -1; }

 private:
  std::array<int, proto::kMaxFdsPerFrame + 1> fds_{};
  size_t count_ = 0;
};

}  // namespace

Connection::Connection(SeqPacket::socket socket, Peer peer, UnixServer::Core& core)
    : socket_(std::move(socket)), peer_(peer), core_(core) {}

void Connection::start() { wait_readable(); }

void Connection::refuse(std::span<const std::byte> frame) {
  ::send(socket_.native_handle(), frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  close();
}

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ec;
  socket_.close(ec);
  out_.clear();
  core_.on_closed(peer_.conn_id);  // may drop the last reference held by the core
}

void Connection::wait_readable() {
  socket_.async_wait(SeqPacket::socket::wait_read, [self = shared_from_this()](boost::system::error_code ec) {
    if (self->closed_) return;
    if (ec) {
      self->close();
      return;
    }
    self->read_frames();
  });
}

void Connection::read_frames() {
  auto self = shared_from_this();
  for (int i = 0; i < kFramesPerTurn; ++i) {
    if (!read_one()) {
      if (!closed_ && out_.empty()) wait_readable();
      return;
    }
  }
  boost::asio::post(core_.io_, [self] {
    if (!self->closed_) self->read_frames();
  });
}

bool Connection::read_one() {
  if (closed_ || !out_.empty()) return false;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * proto::kMaxFdsPerFrame)];
  iovec iov{rx_.data(), rx_.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n = ::recvmsg(socket_.native_handle(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0 && errno == EINTR) return true;
  if (n < 0 && errno == EAGAIN) return false;
  ReceivedFds fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); n >= 0 && c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t k = 0; k < count; ++k) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
      fds.add(fd);
    }
  }
  if (n <= 0 || (msg.msg_flags & MSG_TRUNC) != 0) {  // EOF, error, or a frame longer than any valid one
    if (n > 0) ipc_log()->debug("client pid {} sent an oversized frame; closing", peer_.pid);
    close();
    return false;
  }
  DecodedRequest req = decode_request({rx_.data(), static_cast<size_t>(n)}, fds.count(),
                                      (msg.msg_flags & MSG_CTRUNC) != 0, version_);
  if (req.action == DecodeAction::kClose) {
    ipc_log()->debug("client pid {}: {}; closing", peer_.pid, req.reason);
    core_.metrics_.request(0, RDMAD_ERR_PROTOCOL);
    close();
    return false;
  }
  send(core_.handle(*this, req, fds.first(), tx_));
  return true;
}

void Connection::send(std::span<const std::byte> frame) {
  if (closed_) return;
  if (out_.empty()) {
    ssize_t n = ::send(socket_.native_handle(), frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(frame.size())) return;
    if (n < 0 && errno != EAGAIN) {
      close();
      return;
    }
  }
  out_.emplace_back(frame.begin(), frame.end());
  wait_writable();
}

void Connection::wait_writable() {
  if (write_waiting_) return;
  write_waiting_ = true;
  socket_.async_wait(SeqPacket::socket::wait_write, [self = shared_from_this()](boost::system::error_code ec) {
    self->write_waiting_ = false;
    if (self->closed_) return;
    if (ec) {
      self->close();
      return;
    }
    while (!self->out_.empty()) {
      auto& f = self->out_.front();
      ssize_t n = ::send(self->socket_.native_handle(), f.data(), f.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0 && errno == EAGAIN) {
        self->wait_writable();
        return;
      }
      if (n < 0) {
        self->close();
        return;
      }
      self->out_.pop_front();
    }
    self->read_frames();  // reading was paused while replies were queued
  });
}

}  // namespace rdmad::ipc
