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

// The fds that came with one frame, closed when the frame has been served (a registration keeps
// its own mapping or backend reference, never the fd).
class ReceivedFds {
 public:
  explicit ReceivedFds(msghdr& msg) : count_(proto::take_fds(msg, fds_.data(), fds_.size())) {}
  ~ReceivedFds() {
    for (size_t i = 0; i < count_; ++i) ::close(fds_[i]);
  }
  ReceivedFds(const ReceivedFds&) = delete;
  ReceivedFds& operator=(const ReceivedFds&) = delete;
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
  int fd = socket_.native_handle();
  ::send(fd, frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  // Closing with unread requests makes the peer's next recv fail with ECONNRESET before it sees
  // our answer; drop what already arrived (and any fds with it) first.
  proto::FrameReceiver rx;
  for (int i = 0; i < 16 && rx.receive(fd, rx_.data(), rx_.size(), MSG_DONTWAIT) > 0; ++i) {
    ReceivedFds discard(rx.msg);
  }
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
  proto::FrameReceiver rx;
  ssize_t n = rx.receive(socket_.native_handle(), rx_.data(), rx_.size(), MSG_DONTWAIT);
  if (n < 0 && errno == EAGAIN) return false;
  msghdr& msg = rx.msg;
  ReceivedFds fds(msg);
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
  socket_.async_wait(
      SeqPacket::socket::wait_write, [self = shared_from_this()](boost::system::error_code ec) {
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
