#include "channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>

namespace rdmad::client {
namespace {

using Clock = std::chrono::steady_clock;

bool connection_errno(int err) {
  return err == EPIPE || err == ECONNRESET || err == ENOTCONN || err == ECONNREFUSED || err == ENOENT;
}

// Waits until fd reports `events` (or a hang-up or error, which the caller's next call reports) or
// the deadline passes; false at the deadline. No deadline: waits as long as it takes.
bool wait_for(int fd, short events, const std::optional<Clock::time_point>& deadline) {
  for (;;) {
    int ms = -1;
    if (deadline) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now()).count();
      if (left <= 0) return false;
      ms = static_cast<int>(left);
    }
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, ms);
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return true;  // let the send or receive report it
  }
}

}  // namespace

rdmad_status Channel::open(const std::string& path, std::string* error, uint32_t timeout_ms) {
  close();
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    *error = "socket path too long: " + path;
    return RDMAD_ERR_INVALID_ARGUMENT;
  }
  fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return RDMAD_ERR_SYSTEM;
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  for (;;) {
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) break;
    const int err = errno;
    if (err == EINTR) continue;
    // A full backlog (EAGAIN on a non-blocking AF_UNIX connect): the listener is not accepting, as
    // when a stopped daemon's socket is still held open (socket activation) or the daemon is hung.
    // A blocking connect would wait for it forever; look again until the deadline.
    if (err == EAGAIN && Clock::now() < deadline) {
      ::poll(nullptr, 0, 10);
      continue;
    }
    close();
    // No write permission on the socket (its mode and group, or a directory on the way): the
    // daemon may well be running; this user may not use it.
    if (err == EACCES || err == EPERM) {
      *error = "connect " + path + ": " + std::strerror(err) + " (uid " + std::to_string(::getuid()) +
               " may not use the socket: its group, usually rdmad, or its mode must allow it)";
      return RDMAD_ERR_PERMISSION;
    }
    *error = err == EAGAIN ? "connect " + path + ": nobody accepted the connection within " +
                                 std::to_string(timeout_ms) + " ms (is rdmad stopped or hung?)"
                           : "connect " + path + ": " + std::strerror(err);
    return RDMAD_ERR_CONNECTION;
  }
  version_ = proto::kVersionMin;
  proto::HelloRequest hello{proto::kVersionMin, proto::kVersionMax, 0};
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  Reply r = transact(proto::MsgType::kHello, as_bytes_of(hello), -1, static_cast<int>(std::max<long>(left, 1)));
  if (r.status == RDMAD_OK && r.body.size() != sizeof(proto::HelloReply) &&
      r.body.size() != sizeof(proto::HelloReplyV2)) {
    r.status = RDMAD_ERR_PROTOCOL;
    r.error = "hello reply has the wrong size";
  }
  if (r.status != RDMAD_OK) {
    *error = r.status == RDMAD_ERR_CONNECTION ? "hello on " + path + ": " + r.error : r.error;
    close();
    return r.status;
  }
  proto::HelloReply h;
  std::memcpy(&h, r.body.data(), sizeof(h));
  if (h.version < proto::kVersionMin || h.version > proto::kVersionMax) {
    *error =
        "daemon chose protocol version " + std::to_string(h.version) + " which this library does not speak";
    close();
    return RDMAD_ERR_VERSION;
  }
  const bool v2 = h.version >= proto::kVersionSessions;
  if (r.body.size() != (v2 ? sizeof(proto::HelloReplyV2) : sizeof(proto::HelloReply))) {
    *error = "hello reply has the wrong size for protocol version " + std::to_string(h.version);
    close();
    return RDMAD_ERR_PROTOCOL;
  }
  version_ = h.version;
  instance_id_ = h.instance_id;
  session_ = {};
  if (v2) {
    proto::HelloReplyV2 h2;
    std::memcpy(&h2, r.body.data(), sizeof(h2));
    std::memcpy(session_.data(), h2.session, session_.size());
  }
  return RDMAD_OK;
}

void Channel::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Reply Channel::transact(proto::MsgType type, std::span<const std::byte> body, int fd, int timeout_ms) {
  Reply r;
  if (fd_ < 0) return Reply{RDMAD_ERR_CONNECTION, "not connected", {}, {}};
  std::optional<Clock::time_point> deadline;
  if (timeout_ms >= 0) deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto lost = [&](std::string why) {
    close();
    Reply l{RDMAD_ERR_CONNECTION, std::move(why), {}, {}};
    l.sent = r.sent;
    l.unread = r.unread;
    return l;
  };
  uint64_t id = next_request_id_++;
  proto::Header h =
      proto::make_header(version_, static_cast<uint16_t>(type), static_cast<uint32_t>(body.size()), id);
  iovec iov[2] = {{&h, sizeof(h)}, {const_cast<std::byte*>(body.data()), body.size()}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = body.empty() ? 1 : 2;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  ssize_t n;
  for (;;) {
    n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0 || errno == EINTR) {
      if (n >= 0) break;
      continue;
    }
    if (errno != EAGAIN) break;
    if (!wait_for(fd_, POLLOUT, deadline))
      return lost("the daemon took no request within " + std::to_string(timeout_ms) + " ms");
  }
  // A refused peer gets an error frame and a close: read it even when the send failed.
  bool send_failed = n < 0;
  int send_errno = errno;
  r.sent = !send_failed;
  proto::FrameReceiver rx;
  for (;;) {
    n = rx.receive(fd_, rx_.data(), rx_.size(), MSG_DONTWAIT);
    if (n < 0 && errno == EAGAIN && !send_failed) {
      if (!wait_for(fd_, POLLIN, deadline))
        return lost("no reply from the daemon within " + std::to_string(timeout_ms) + " ms");
      continue;
    }
    // A peer that closed with our request unread leaves ECONNRESET pending, reported before the
    // frames it sent first (its refusal): look once more for such a frame.
    if (n < 0 && errno == ECONNRESET) {
      r.unread = r.sent;
      send_failed = true;
      send_errno = ECONNRESET;
      n = rx.receive(fd_, rx_.data(), rx_.size(), MSG_DONTWAIT);
    }
    std::array<int, proto::kMaxFdsPerFrame> got{};
    const size_t nfds = n > 0 ? proto::take_fds(rx.msg, got.data(), got.size()) : 0;
    // Only a kFlowOpen reply carries fds; anything else that came is closed.
    auto drop_fds = [&] {
      for (size_t i = 0; i < nfds; ++i) ::close(got[i]);
    };
    if (n <= 0) {
      int err = n < 0 ? errno : ECONNRESET;
      if (send_failed) err = send_errno;
      if (n == 0 || connection_errno(err) || err == EAGAIN)
        return lost(std::string("connection to the daemon lost: ") + std::strerror(err));
      close();
      return Reply{RDMAD_ERR_SYSTEM, std::string("recvmsg: ") + std::strerror(err), {}, {}};
    }
    proto::Header rh;
    if (static_cast<size_t>(n) < sizeof(rh) || (rx.msg.msg_flags & MSG_TRUNC) != 0) {
      drop_fds();
      break;
    }
    std::memcpy(&rh, rx_.data(), sizeof(rh));
    if (rh.magic != proto::kMagic || rh.length != static_cast<size_t>(n) - sizeof(rh)) {
      drop_fds();
      break;
    }
    auto rbody = std::span<const std::byte>(rx_.data() + sizeof(rh), rh.length);
    if (rh.type == static_cast<uint16_t>(proto::MsgType::kError) && rh.length == sizeof(proto::ErrorReply) &&
        (rh.request_id == id || rh.request_id == 0)) {
      proto::ErrorReply e;
      std::memcpy(&e, rbody.data(), sizeof(e));
      e.message[sizeof(e.message) - 1] = '\0';
      r.status = e.status > 0 && e.status <= RDMAD_ERR_ADMIN_SOCKET ? static_cast<rdmad_status>(e.status)
                                                                   : RDMAD_ERR_PROTOCOL;
      r.error = e.message;
      drop_fds();
      if (send_failed) close();
      return r;
    }
    if (rh.request_id != id || rh.type != proto::reply_type(type)) {
      drop_fds();
      break;
    }
    r.body = rbody;
    if (type == proto::MsgType::kFlowOpen)
      r.fds.assign(got.begin(), got.begin() + static_cast<long>(nfds));
    else
      drop_fds();
    return r;
  }
  close();
  return Reply{RDMAD_ERR_PROTOCOL, "malformed reply from the daemon", {}, {}};
}

}  // namespace rdmad::client
