// A hand-driven protocol client for tests: sends arbitrary frames (with fds) and reads replies,
// so tests can speak to the server below what librdmad allows.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "rdmad/protocol.h"

namespace rdmad::test {

struct RawReply {
  bool closed = false;  // EOF: the server dropped the connection
  proto::Header header{};
  std::vector<std::byte> body;
  rdmad_status status() const {  // error replies only
    if (header.type != static_cast<uint16_t>(proto::MsgType::kError) ||
        body.size() != sizeof(proto::ErrorReply))
      return RDMAD_OK;
    proto::ErrorReply e;
    std::memcpy(&e, body.data(), sizeof(e));
    return static_cast<rdmad_status>(e.status);
  }
  std::string message() const {
    if (body.size() != sizeof(proto::ErrorReply)) return {};
    proto::ErrorReply e;
    std::memcpy(&e, body.data(), sizeof(e));
    return std::string(e.message, strnlen(e.message, sizeof(e.message)));
  }
};

class RawClient {
 public:
  explicit RawClient(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    timeval tv{5, 0};  // a broken server fails the test instead of hanging it
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  // Sends raw bytes with fds; returns false when sendmsg failed (or, with MSG_DONTWAIT in
  // `flags`, the socket is full).
  bool send_bytes(const void* data, size_t n, const std::vector<int>& fds = {}, int flags = 0) {
    iovec iov{const_cast<void*>(data), n};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
    if (!fds.empty()) {
      msg.msg_control = control.data();
      msg.msg_controllen = control.size();
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      if (c == nullptr) return false;
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    return ::sendmsg(fd_, &msg, MSG_NOSIGNAL | flags) == static_cast<ssize_t>(n);
  }

  template <class Body>
  bool send(proto::MsgType type, const Body& body, uint64_t id, const std::vector<int>& fds = {},
            uint16_t version = proto::kVersionMin, int flags = 0) {
    std::vector<std::byte> frame(sizeof(proto::Header) + sizeof(Body));
    auto h = proto::make_header(version, static_cast<uint16_t>(type), sizeof(Body), id);
    std::memcpy(frame.data(), &h, sizeof(h));
    std::memcpy(frame.data() + sizeof(h), &body, sizeof(Body));
    return send_bytes(frame.data(), frame.size(), fds, flags);
  }
  bool send_empty(proto::MsgType type, uint64_t id) {
    auto h = proto::make_header(proto::kVersionMin, static_cast<uint16_t>(type), 0, id);
    return send_bytes(&h, sizeof(h));
  }

  RawReply receive() {
    RawReply r;
    std::vector<std::byte> buf(proto::kMaxFrameBytes);
    ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
    if (n < 0 && errno == ECONNRESET) n = ::recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT);  // see Channel
    if (n < static_cast<ssize_t>(sizeof(proto::Header))) {
      r.closed = true;
      return r;
    }
    std::memcpy(&r.header, buf.data(), sizeof(r.header));
    r.body.assign(buf.begin() + sizeof(proto::Header), buf.begin() + n);
    return r;
  }

  // Negotiates version 1 (what send() speaks by default) unless asked for more.
  bool hello(uint16_t max_version = proto::kVersionMin) {
    send(proto::MsgType::kHello, proto::HelloRequest{proto::kVersionMin, max_version, 0}, 1);
    RawReply r = receive();
    return !r.closed && r.header.type == proto::reply_type(proto::MsgType::kHello);
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

}  // namespace rdmad::test
