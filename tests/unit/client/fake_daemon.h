// A daemon played by the test: a SOCK_SEQPACKET listener in a temp dir that the test drives frame
// by frame (usually from a thread of its own while the main thread is inside a library call), so
// that the library's handling of a daemon that stops, dies or never answers can be hit exactly.
// Every wait has a deadline; a broken library fails the test instead of hanging it.
#pragma once

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "rdmad/flow_ring.h"
#include "rdmad/protocol.h"
#include "support/temp_dir.h"
#include "watchdog.h"

namespace rdmad::test {

struct Frame {
  proto::Header header{};
  std::vector<std::byte> body;
};

class FakeDaemon {
 public:
  explicit FakeDaemon(int backlog = 16) {
    path_ = dir_.path() + "/rdmad.sock";
    listen_on_path(backlog);
  }
  // A restarted daemon: a new listener on the same path (the old one's connections closed).
  bool relisten(int backlog = 16) {
    die_leaving_socket_file();
    ::unlink(path_.c_str());
    listen_on_path(backlog);
    return bound_;
  }
  ~FakeDaemon() {
    for (int c : conns_) ::close(c);
    stop_listening();
  }
  FakeDaemon(const FakeDaemon&) = delete;
  FakeDaemon& operator=(const FakeDaemon&) = delete;

  bool bound() const { return bound_; }
  const std::string& path() const { return path_; }

  // What a stopping daemon does first: no new connections, and the socket file is gone.
  void stop_listening() {
    if (listener_ >= 0) ::close(listener_);
    listener_ = -1;
    ::unlink(path_.c_str());
  }
  // A daemon killed by SIGKILL: the kernel closes the listener, the file stays behind.
  void die_leaving_socket_file() {
    if (listener_ >= 0) ::close(listener_);
    listener_ = -1;
    for (int c : conns_) ::close(c);
    conns_.clear();
  }

  // The next connection, or -1 after timeout_ms.
  int accept_one(int timeout_ms = 2000) {
    if (!wait_readable(listener_, timeout_ms)) return -1;
    int c = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c >= 0) conns_.push_back(c);
    return c;
  }
  void close_conn(int c) {
    ::close(c);
    std::erase(conns_, c);
  }

  static bool wait_readable(int fd, int timeout_ms) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, timeout_ms) > 0;
  }

  // One frame from `c`; false on EOF or after timeout_ms.
  static bool read_frame(int c, Frame* f, int timeout_ms = 2000) {
    if (!wait_readable(c, timeout_ms)) return false;
    std::vector<std::byte> buf(proto::kMaxFrameBytes);
    ssize_t n = ::recv(c, buf.data(), buf.size(), 0);
    if (n < static_cast<ssize_t>(sizeof(proto::Header))) return false;
    std::memcpy(&f->header, buf.data(), sizeof(f->header));
    f->body.assign(buf.begin() + sizeof(proto::Header), buf.begin() + n);
    return true;
  }

  static bool reply(int c, const Frame& request, const void* body, size_t n, const std::vector<int>& fds = {}) {
    auto type = static_cast<proto::MsgType>(request.header.type);
    proto::Header h = proto::make_header(request.header.version, proto::reply_type(type), static_cast<uint32_t>(n),
                                         request.header.request_id);
    iovec iov[2] = {{&h, sizeof(h)}, {const_cast<void*>(body), n}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n > 0 ? 2 : 1;
    std::vector<char> control(CMSG_SPACE(sizeof(int) * std::max<size_t>(fds.size(), 1)));
    if (!fds.empty()) {
      msg.msg_control = control.data();
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* cm = CMSG_FIRSTHDR(&msg);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(cm), fds.data(), sizeof(int) * fds.size());
    }
    return ::sendmsg(c, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof(h) + n);
  }

  // Reads the hello on `c` and answers it as daemon instance `instance`.
  static bool answer_hello(int c, uint64_t instance) {
    Frame f;
    if (!read_frame(c, &f) || f.header.type != static_cast<uint16_t>(proto::MsgType::kHello)) return false;
    proto::HelloReply h{proto::kVersionMin, 0, static_cast<uint32_t>(proto::kMaxFrameBytes), instance};
    return reply(c, f, &h, sizeof(h));
  }

  // Accepts a connection and answers its hello; the connection, or -1.
  int accept_client(uint64_t instance = 0x1234) {
    int c = accept_one();
    if (c < 0 || !answer_hello(c, instance)) return -1;
    return c;
  }

  // An empty NIC list, the simplest request to answer.
  static bool answer_query_nics(int c) {
    Frame f;
    if (!read_frame(c, &f) || f.header.type != static_cast<uint16_t>(proto::MsgType::kQueryNics)) return false;
    proto::NicListReply empty{};
    return reply(c, f, &empty, sizeof(empty));
  }

 private:
  void listen_on_path(int backlog) {
    listener_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    bound_ = ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
             ::listen(listener_, backlog) == 0;
  }
  TempDir dir_;
  std::string path_;
  int listener_ = -1;
  bool bound_ = false;
  std::vector<int> conns_;
};

// The daemon's half of one flow: the ring memfd (mapped here too) and the two eventfds, handed to
// the client with the FlowOpen reply. The test consumes requests and writes completions itself.
class FakeFlow {
 public:
  FakeFlow(uint32_t sq_depth, uint32_t cq_depth, uint64_t id, ring::FlowState state)
      : sq_depth_(sq_depth), cq_depth_(cq_depth), id_(id) {
    layout_ = ring::layout_for(sq_depth, cq_depth);
    memfd_ = ::memfd_create("fake-flow", MFD_CLOEXEC);
    if (memfd_ < 0 || ::ftruncate(memfd_, static_cast<off_t>(layout_.total_bytes)) != 0) std::abort();
    base_ = ::mmap(nullptr, layout_.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd_, 0);
    if (base_ == MAP_FAILED) std::abort();
    ring::init_header(base_, id, sq_depth, cq_depth);
    header()->flow_state.store(static_cast<uint32_t>(state));
    doorbell_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    completion_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    sq_ = ring::Consumer<ring::Sqe>(ring::sq_slots(base_, layout_), sq_depth, &header()->sq_tail, &header()->sq_head);
    cq_ = ring::Producer<ring::Cqe>(ring::cq_slots(base_, layout_), cq_depth, &header()->cq_tail, &header()->cq_head);
  }
  ~FakeFlow() {
    ::munmap(base_, layout_.total_bytes);
    for (int fd : {memfd_, doorbell_, completion_}) ::close(fd);
  }

  ring::Header* header() { return static_cast<ring::Header*>(base_); }

  // Reads the FlowOpen request on `c` (into *seen when given) within timeout_ms and answers it with
  // this flow.
  bool answer_open(int c, Frame* seen = nullptr, int timeout_ms = 2000) {
    Frame f;
    if (!FakeDaemon::read_frame(c, &f, timeout_ms) || f.header.type != static_cast<uint16_t>(proto::MsgType::kFlowOpen))
      return false;
    if (seen != nullptr) *seen = f;
    proto::FlowOpenReply r{id_, layout_.total_bytes, sq_depth_, cq_depth_,
                           header()->flow_state.load(), 0};
    return FakeDaemon::reply(c, f, &r, sizeof(r), {memfd_, doorbell_, completion_});
  }

  // Takes up to n requests from the submission ring, as the daemon's engine does.
  std::vector<ring::Sqe> take(size_t n) {
    std::vector<ring::Sqe> out;
    ring::Sqe e;
    while (out.size() < n && sq_.pop(e)) out.push_back(e);
    sq_.release();
    return out;
  }
  // Writes a completion and wakes a waiting client.
  void complete(const ring::Sqe& e, int32_t status) {
    ring::Cqe c{};
    c.wr_id = e.wr_id;
    c.length = status == 0 ? e.length : 0;
    c.status = status;
    c.op = e.op;
    if (!cq_.push(c)) std::abort();
    if (ring::needs_doorbell(header()->client_armed)) {
      uint64_t one = 1;
      (void)!::write(completion_, &one, sizeof(one));
    }
  }

 private:
  uint32_t sq_depth_, cq_depth_;
  uint64_t id_;
  ring::Layout layout_{};
  int memfd_ = -1, doorbell_ = -1, completion_ = -1;
  void* base_ = nullptr;
  ring::Consumer<ring::Sqe> sq_;
  ring::Producer<ring::Cqe> cq_;
};

}  // namespace rdmad::test
