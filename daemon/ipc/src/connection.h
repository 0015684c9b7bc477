// One client connection: reads frames (with their fds) when the socket is readable, hands them to
// the server core, and writes replies; a full send buffer pauses reading until it drains.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "server_core.h"

namespace rdmad::ipc {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(SeqPacket::socket socket, Peer peer, UnixServer::Core& core);

  void start();
  // Sends one frame, then closes (refused peers).
  void refuse(std::span<const std::byte> frame);
  void close();
  // Sends a reply frame (with fds, which are duplicated if the frame must wait).
  void send(std::span<const std::byte> frame, const ReplyFds* fds = nullptr);

  const Peer& peer() const { return peer_; }
  int native_handle() { return socket_.native_handle(); }
  uint16_t version() const { return version_; }
  void set_version(uint16_t v) { version_ = v; }

 private:
  void wait_readable();
  void read_frames();
  bool read_one();  // false: stop reading (nothing left, paused, or closed)
  void wait_writable();

  SeqPacket::socket socket_;
  Peer peer_;
  UnixServer::Core& core_;
  uint16_t version_ = 0;
  bool closed_ = false;
  bool write_waiting_ = false;
  struct Pending {
    std::vector<std::byte> frame;
    std::vector<int> fds;  // dup()ed, closed once sent or dropped
  };
  std::deque<Pending> out_;
  FrameBuffer rx_{};
  FrameBuffer tx_{};
};

}  // namespace rdmad::ipc
