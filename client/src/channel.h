// One SOCK_SEQPACKET connection to the daemon: frames out (with at most one fd), replies in.
// Synchronous: the caller holds the client's mutex around transact(). The socket is non-blocking
// and every wait is a poll(), so connecting and the hello exchange are bounded by a timeout: a
// socket file nobody accepts on, or a listener that never answers, is an error, not a hang.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "rdmad/protocol.h"
#include "rdmad/rdmad.h"

namespace rdmad::client {

struct Reply {
  rdmad_status status = RDMAD_OK;
  std::string error;  // daemon's message when status != OK
  std::span<const std::byte> body;
  std::vector<int> fds;  // fds that came with the reply (kFlowOpen); the caller owns them
  // The request left (sendmsg succeeded) before the connection was lost: the daemon may have
  // acted on it, so it is not simply sent again (see call()).
  bool sent = false;
  // With RDMAD_ERR_CONNECTION and sent: the daemon closed with the request unread (ECONNRESET),
  // so it never acted on it.
  bool unread = false;
};

class Channel {
 public:
  Channel() = default;
  ~Channel() { close(); }
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Connects and runs the hello exchange within timeout_ms (a full backlog is retried until then).
  // On failure *error says why.
  rdmad_status open(const std::string& path, std::string* error, uint32_t timeout_ms);
  void close();
  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  uint16_t version() const { return version_; }
  uint64_t instance_id() const { return instance_id_; }
  // The session token the daemon gave this connection (protocol version 2 or later; else all zero), or the
  // one of a session this connection resumed.
  using Session = std::array<uint8_t, proto::kSessionTokenBytes>;
  const Session& session() const { return session_; }
  bool has_session() const { return version_ >= proto::kVersionSessions; }
  void set_session(const Session& s) { session_ = s; }

  // Sends one request (fd < 0: none) and waits for its reply, at most timeout_ms (-1: until the
  // reply or the connection's end). The reply body stays valid until the next call.
  // RDMAD_ERR_CONNECTION means the connection is gone (and is closed).
  Reply transact(proto::MsgType type, std::span<const std::byte> body, int fd, int timeout_ms = -1);

 private:
  int fd_ = -1;
  uint16_t version_ = proto::kVersionMin;
  uint64_t next_request_id_ = 1;
  uint64_t instance_id_ = 0;
  Session session_{};
  std::array<std::byte, proto::kMaxFrameBytes> rx_{};
};

template <class T>
std::span<const std::byte> as_bytes_of(const T& value) {
  return {reinterpret_cast<const std::byte*>(&value), sizeof(T)};
}

}  // namespace rdmad::client
