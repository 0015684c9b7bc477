// One client connection, served on one worker thread: reads frames (with their fds) when the
// socket is readable, a few per turn (kFramesPerTurn) so that the worker's other connections get
// theirs, hands them to the server core, and writes replies; a full send buffer, or a request being
// served elsewhere (on the control thread, or a large registration on a bulk thread), pauses
// reading (replies stay in request order).
#pragma once

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "server_core.h"

namespace rdmad::clients {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(SeqPacket::socket socket, Peer peer, size_t worker, UnixServer::Core& core);

  // On the worker thread from here on, unless said otherwise.
  void start();
  // Its worker's turn (ServiceWorker::run_turn): serves what is waiting, a sparse turn one request.
  void turn(bool sparse);
  // Sends one frame, then closes (refused peers; any thread, before start()).
  void refuse(std::span<const std::byte> frame);
  void close();
  // Sends a reply frame (with fds, which are duplicated if the frame must wait).
  void send(std::span<const std::byte> frame, const ReplyFds* fds = nullptr);
  // Any thread: sends `frame` (and the fds, which it then closes) on the worker, then resumes
  // reading if it was paused for a request served elsewhere.
  void send_from_elsewhere(std::vector<std::byte> frame, std::vector<int> fds, bool resume);
  // Bulk thread: the registration handed over has been served; sends its reply and resumes (or,
  // closed meanwhile, now lets the server release the connection).
  void bulk_done(std::vector<std::byte> frame);

  const Peer& peer() const { return peer_; }
  // At accept, before the connection is served (its tenant is read after its credentials).
  void set_pod(std::string pod_uid) { peer_.pod_uid = std::move(pod_uid); }
  int native_handle() { return socket_.native_handle(); }
  uint16_t version() const { return version_; }
  size_t worker() const { return worker_; }
  void set_version(uint16_t v) { version_ = v; }
  // Flows this connection has open (the control thread counts them): it is not idle then.
  std::atomic<uint32_t> flows_open{0};

 private:
  void wait_readable();
  // Asks its worker for a turn (unless one is already asked for).
  void read_frames();
  bool read_one();  // false: stop reading (nothing left, paused, or closed)
  void wait_writable();
  // The hello deadline, then the idle check (IpcConfig::hello_timeout_ms, idle_timeout_ms).
  void arm_timer(std::chrono::milliseconds after);
  void on_timer();

  SeqPacket::socket socket_;
  Peer peer_;
  size_t worker_;
  UnixServer::Core& core_;
  uint16_t version_ = 0;
  boost::asio::steady_timer timer_;
  std::chrono::steady_clock::time_point last_rx_ = std::chrono::steady_clock::now();
  bool closed_ = false;
  bool read_waiting_ = false;
  bool write_waiting_ = false;
  bool awaiting_elsewhere_ = false;  // a request is being served on the control thread or in bulk
  // A registration is being served on a bulk thread: closing waits for it before the connection's
  // registrations are released (the one in flight among them).
  bool bulk_in_flight_ = false;
  // Fair turns (ServiceWorker): whether the connection waits in its worker's queue, the sparse
  // requests it has left, and when it last sent a reply (a quiet spell is measured from there).
  bool queued_ = false;
  uint32_t sparse_credit_ = 0;
  std::chrono::steady_clock::time_point last_reply_{};
  struct Pending {
    std::vector<std::byte> frame;
    std::vector<int> fds;  // dup()ed, closed once sent or dropped
  };
  std::deque<Pending> out_;
  FrameBuffer rx_{};
  FrameBuffer tx_{};
};

}  // namespace rdmad::clients
