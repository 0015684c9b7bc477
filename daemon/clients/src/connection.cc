#include "connection.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>

#include "log.h"
#include "rdmad/base/log_fields.h"

namespace rdmad::clients {
namespace {

// Frames served per turn before yielding to the worker's other connections: a client that
// pipelines requests gets this many, then goes behind every connection that is ready.
constexpr int kFramesPerTurn = 4;
// A connection whose client sent nothing for this long after its last reply is sparse for its
// next kSparseBurst requests (ServiceWorker). A client that keeps the worker busy answers at once
// and is never sparse; one that waits this long between bursts is held to kSparseBurst requests
// per kSparseIdle ahead of the others, and to three of every four turns.
constexpr std::chrono::milliseconds kSparseIdle{10};
constexpr uint32_t kSparseBurst = 4;
constexpr int kSparseStreakMax = 3;
// Turns a worker gives in a row before it takes the reactor's readiness events again (a sparse
// client that becomes ready meanwhile waits at most this many turns), never two to one connection.
constexpr int kTurnsPerPoll = 8;

// The fds that came with one frame, closed when the frame has been served (a registration keeps
// its own mapping or backend reference, never the fd).
class ReceivedFds {
 public:
  explicit ReceivedFds(msghdr& msg) : count_(proto::take_fds(msg, fds_.data(), fds_.size())) {}
  ~ReceivedFds() { close(); }
  void close() {
    for (size_t i = 0; i < count_; ++i)
      if (fds_[i] >= 0) ::close(fds_[i]);
    count_ = 0;
  }
  ReceivedFds(const ReceivedFds&) = delete;
  ReceivedFds& operator=(const ReceivedFds&) = delete;
  size_t count() const { return count_; }
  int first() const { return count_ > 0 ? fds_[0] : -1; }
  // The first fd, which the caller now owns (-1 if none).
  int release_first() {
    if (count_ == 0) return -1;
    const int fd = fds_[0];
    fds_[0] = -1;
    return fd;
  }

 private:
  std::array<int, proto::kMaxFdsPerFrame + 1> fds_{};
  size_t count_ = 0;
};

// sendmsg of one frame with its fds; returns what ::sendmsg returns.
ssize_t send_frame(int sock, std::span<const std::byte> frame, const int* fds, size_t nfds) {
  iovec iov{const_cast<std::byte*>(frame.data()), frame.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * proto::kMaxFdsPerFrame)];
  if (nfds > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  return ::sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
}

void close_all(std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
  fds.clear();
}

}  // namespace

Connection::Connection(SeqPacket::socket socket, Peer peer, size_t worker, UnixServer::Core& core)
    : socket_(std::move(socket)), peer_(peer), worker_(worker), core_(core), timer_(socket_.get_executor()) {}

void Connection::start() {
  arm_timer(std::chrono::milliseconds(core_.config_.hello_timeout_ms));
  wait_readable();
}

void Connection::arm_timer(std::chrono::milliseconds after) {
  timer_.expires_after(after);
  timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!ec && self && !self->closed_) self->on_timer();
  });
}

void Connection::on_timer() {
  // A connection costs a descriptor and a table entry: one that never says hello, or that holds
  // nothing and says nothing, gives them back.
  if (version_ == 0) {
    ipc_log()->debug("client closed pid={} reason=no_hello timeout_ms={}", peer_.pid, core_.config_.hello_timeout_ms);
    close();
    return;
  }
  const uint32_t idle_ms = core_.config_.idle_timeout_ms;
  if (idle_ms == 0) return;
  const auto idle = std::chrono::milliseconds(idle_ms);
  const auto since = std::chrono::steady_clock::now() - last_rx_;
  if (since < idle || awaiting_elsewhere_ || flows_open.load(std::memory_order_relaxed) > 0 ||
      core_.service_.holds_registrations(peer_.conn_id)) {
    arm_timer(since < idle ? std::chrono::duration_cast<std::chrono::milliseconds>(idle - since) : idle);
    return;
  }
  ipc_log()->debug("client closed pid={} reason=idle idle_ms={}", peer_.pid, idle_ms);
  close();
}

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
  timer_.cancel();
  socket_.close(ec);
  for (auto& p : out_) close_all(p.fds);
  out_.clear();
  if (!bulk_in_flight_) core_.connection_closed(peer_.conn_id);  // else bulk_done() does
}

void Connection::wait_readable() {
  if (read_waiting_) return;
  read_waiting_ = true;
  socket_.async_wait(SeqPacket::socket::wait_read, [self = shared_from_this()](boost::system::error_code ec) {
    self->read_waiting_ = false;
    if (self->closed_) return;
    if (ec) {
      self->close();
      return;
    }
    // A request came after a quiet spell: the next few are served as a sparse client's.
    if (std::chrono::steady_clock::now() - self->last_reply_ >= kSparseIdle) self->sparse_credit_ = kSparseBurst;
    ServiceWorker& w = *self->core_.workers_[self->worker_];
    if (w.sparse.empty() && w.busy.empty() && !w.turn_posted && !self->queued_) {
      self->turn(self->sparse_credit_ > 0);  // nobody waits: no queue to go through
      return;
    }
    self->read_frames();
  });
}

void Connection::read_frames() {
  if (closed_ || queued_) return;
  queued_ = true;
  core_.workers_[worker_]->enqueue(shared_from_this(), sparse_credit_ > 0);
}

void Connection::turn(bool sparse) {
  queued_ = false;
  if (closed_) return;
  // A sparse turn is one request (each costs a credit); a busy one a few.
  const int frames = sparse ? 1 : kFramesPerTurn;
  for (int i = 0; i < frames; ++i) {
    if (!read_one()) {
      if (!closed_ && out_.empty() && !awaiting_elsewhere_) wait_readable();
      return;
    }
    if (sparse_credit_ > 0) --sparse_credit_;
  }
  read_frames();  // more may be waiting: behind the others
}

void ServiceWorker::enqueue(std::shared_ptr<Connection> conn, bool is_sparse) {
  (is_sparse ? sparse : busy).push_back(std::move(conn));
  if (turn_posted) return;  // run_turn() will come to it
  turn_posted = true;
  boost::asio::post(io, [this] { run_turn(); });
}

void ServiceWorker::run_turn() {
  // turn_posted stays set while the turns run: connections they requeue need no other post. At
  // most one turn per connection waiting now: one that is served and queues again waits for
  // the readiness events of the others first.
  const size_t waiting = std::min<size_t>(kTurnsPerPoll, sparse.size() + busy.size());
  for (size_t t = 0; t < waiting; ++t) {
    std::shared_ptr<Connection> conn;
    const bool is_sparse = !sparse.empty() && (busy.empty() || sparse_streak < kSparseStreakMax);
    if (is_sparse) {
      conn = std::move(sparse.front());
      sparse.pop_front();
      ++sparse_streak;
    } else {
      conn = std::move(busy.front());
      busy.pop_front();
      sparse_streak = 0;
    }
    conn->turn(is_sparse);
  }
  // Posted, not looped on: the reactor's readiness events are taken before the next turns.
  turn_posted = !sparse.empty() || !busy.empty();
  if (turn_posted) boost::asio::post(io, [this] { run_turn(); });
}

bool Connection::read_one() {
  if (closed_ || !out_.empty() || awaiting_elsewhere_) return false;
  proto::FrameReceiver rx;
  ssize_t n = rx.receive(socket_.native_handle(), rx_.data(), rx_.size(), MSG_DONTWAIT);
  if (n < 0 && errno == EAGAIN) return false;
  msghdr& msg = rx.msg;
  ReceivedFds fds(msg);
  last_rx_ = std::chrono::steady_clock::now();
  if (n <= 0 || (msg.msg_flags & MSG_TRUNC) != 0) {  // EOF, error, or a frame longer than any valid one
    if (n > 0) ipc_log()->debug("client closed pid={} reason=oversized_frame", peer_.pid);
    close();
    return false;
  }
  DecodedRequest req = decode_request({rx_.data(), static_cast<size_t>(n)}, fds.count(),
                                      (msg.msg_flags & MSG_CTRUNC) != 0, version_);
  if (req.action == DecodeAction::kClose) {
    ipc_log()->debug("client closed pid={} reason=bad_frame error={}", peer_.pid, base::q(req.reason));
    core_.metrics_.request(0, RDMAD_ERR_PROTOCOL);
    close();
    return false;
  }
  if (req.action == DecodeAction::kDispatch && served_in_bulk(req)) {
    // Mapping and registering it takes long: a bulk thread does it, and this worker serves the
    // other connections meanwhile. The quota is taken when the bulk thread starts.
    awaiting_elsewhere_ = true;
    bulk_in_flight_ = true;
    core_.serve_in_bulk(shared_from_this(), std::move(req), fds.release_first());
    return false;
  }
  if (req.action == DecodeAction::kDispatch && !served_on_worker(req.header.type)) {
    awaiting_elsewhere_ = true;  // no fd comes with these requests
    core_.forward_to_control(shared_from_this(), std::move(req));
    return false;
  }
  ReplyFds reply_fds;
  auto frame = core_.handle(*this, req, fds.first(), tx_, reply_fds);
  fds.close();  // before the reply: a client that has its answer finds the daemon holding nothing
  if (!frame.empty()) send(frame, &reply_fds);
  return true;
}

void Connection::send(std::span<const std::byte> frame, const ReplyFds* fds) {
  if (closed_) return;
  last_reply_ = std::chrono::steady_clock::now();
  const size_t nfds = fds != nullptr ? fds->count : 0;
  if (out_.empty()) {
    ssize_t n = send_frame(socket_.native_handle(), frame, nfds > 0 ? fds->fds.data() : nullptr, nfds);
    if (n == static_cast<ssize_t>(frame.size())) return;
    if (n < 0 && errno != EAGAIN) {
      close();
      return;
    }
  }
  Pending p{{frame.begin(), frame.end()}, {}};
  for (size_t i = 0; i < nfds; ++i) {
    int d = ::fcntl(fds->fds[i], F_DUPFD_CLOEXEC, 0);
    if (d >= 0) p.fds.push_back(d);
  }
  out_.push_back(std::move(p));
  wait_writable();
}

void Connection::send_from_elsewhere(std::vector<std::byte> frame, std::vector<int> fds, bool resume) {
  boost::asio::post(socket_.get_executor(), [self = shared_from_this(), frame = std::move(frame),
                                             fds = std::move(fds), resume]() mutable {
    if (!frame.empty()) {
      ReplyFds reply;
      for (int fd : fds)
        if (reply.count < reply.fds.size()) reply.fds[reply.count++] = fd;
      self->send(frame, &reply);
    }
    close_all(fds);
    if (resume) {
      self->awaiting_elsewhere_ = false;
      self->read_frames();
    }
  });
}

void Connection::bulk_done(std::vector<std::byte> frame) {
  boost::asio::post(socket_.get_executor(), [self = shared_from_this(), frame = std::move(frame)] {
    self->bulk_in_flight_ = false;
    if (self->closed_) {
      self->core_.connection_closed(self->peer_.conn_id);
      return;
    }
    self->send(frame);
    self->awaiting_elsewhere_ = false;
    self->read_frames();
  });
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
          ssize_t n = send_frame(self->socket_.native_handle(), f.frame, f.fds.data(), f.fds.size());
          if (n < 0 && errno == EAGAIN) {
            self->wait_writable();
            return;
          }
          if (n < 0) {
            self->close();
            return;
          }
          close_all(f.fds);
          self->out_.pop_front();
        }
        self->read_frames();  // reading was paused while replies were queued
      });
}

}  // namespace rdmad::clients
