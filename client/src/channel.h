// One SOCK_SEQPACKET connection to the daemon: frames out (with at most one fd), replies in.
// Blocking and synchronous: the caller holds the client's mutex around transact().
#pragma once

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
};

class Channel {
 public:
  Channel() = default;
  ~Channel() { close(); }
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Connects and runs the hello exchange. On failure *error says why.
  rdmad_status open(const std::string& path, std::string* error);
  void close();
  bool is_open() const { return fd_ >= 0; }
  uint16_t version() const { return version_; }
  uint64_t instance_id() const { return instance_id_; }

  // Sends one request (fd < 0: none) and waits for its reply. The reply body stays valid until the
  // next call. RDMAD_ERR_CONNECTION means the connection is gone.
  Reply transact(proto::MsgType type, std::span<const std::byte> body, int fd);

 private:
  int fd_ = -1;
  uint16_t version_ = proto::kVersionMin;
  uint64_t next_request_id_ = 1;
  uint64_t instance_id_ = 0;
  std::array<std::byte, proto::kMaxFrameBytes> rx_{};
};

template <class T>
std::span<const std::byte> as_bytes_of(const T& value) {
  return {reinterpret_cast<const std::byte*>(&value), sizeof(T)};
}

}  // namespace rdmad::client
