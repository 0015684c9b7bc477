// Private state of UnixServer shared by the acceptor and the connections. Threads: the acceptor,
// the connection table and the flow/admin/NIC requests live on the control io_context; each
// connection lives on one worker (its own io_context and thread) that serves the registration
// requests itself and hands everything else to the control thread.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <array>
#include <deque>
#include <map>
#include <boost/asio/basic_seq_packet_socket.hpp>
#include <boost/asio/basic_socket_acceptor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/basic_endpoint.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "frame_writer.h"
#include "rdmad/daemon/clients/fd_budget.h"
#include "rdmad/daemon/clients/ipc_metrics.h"
#include "rdmad/daemon/clients/registration_service.h"
#include "rdmad/daemon/clients/request_decoder.h"
#include "rdmad/daemon/clients/unix_server.h"

namespace rdmad::clients {

class Connection;

// File descriptors that go out with a reply (SCM_RIGHTS); owned by whoever produced them.
struct ReplyFds {
  std::array<int, proto::kMaxFdsPerFrame> fds{};
  size_t count = 0;
};

// AF_UNIX SOCK_SEQPACKET for Asio (Boost 1.74 has no local::seq_packet_protocol).
class SeqPacket {
 public:
  using endpoint = boost::asio::local::basic_endpoint<SeqPacket>;
  using socket = boost::asio::basic_seq_packet_socket<SeqPacket>;
  using acceptor = boost::asio::basic_socket_acceptor<SeqPacket>;
  int type() const { return SOCK_SEQPACKET; }
  int protocol() const { return 0; }
  int family() const { return AF_UNIX; }
};

// One thread serving its share of the client connections. Connections with requests waiting take
// turns (Connection::turn) from two queues: `sparse` for a connection that had been quiet (no
// request for kSparseIdle after its last reply) for its next kSparseBurst requests, `busy` for
// the others; of four turns in a row at most three go to sparse connections while busy ones
// wait. So a client that asks now and then (a probe, a rank registering its buffers) is served
// ahead of the clients that keep the worker busy, and those still get a quarter of the turns
// whatever the sparse ones do. Worker thread only.
struct ServiceWorker {
  void enqueue(std::shared_ptr<Connection> conn, bool sparse);
  void run_turn();  // one connection's turn, then the next is posted (the reactor runs between)

  boost::asio::io_context io{1};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::thread thread;
  // Never opened: constructing it creates the io_context's reactor (epoll, eventfd, timerfd) now
  // rather than with the first connection, so the server's fd use does not grow with clients.
  SeqPacket::socket reactor_anchor{io};
  // After io: the connections waiting hold sockets of it.
  std::deque<std::shared_ptr<Connection>> sparse, busy;
  bool turn_posted = false;
  int sparse_streak = 0;
};

// The threads that serve large registrations (served_in_bulk), sharing one queue.
struct BulkPool {
  boost::asio::io_context io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
};

// Requests a worker serves itself (the registration table is thread-safe); the others touch state
// of the control thread (flows, NICs, the daemon's admin handler) and are served there.
bool served_on_worker(uint16_t type);
// Host registrations of at least this many bytes, and every dma-buf registration (pinned by the
// NIC), are served by the bulk threads: mapping, faulting in and registering them takes from
// a fraction of a millisecond to milliseconds per GiB, which the worker's other clients must not
// wait for.
inline constexpr uint64_t kBulkRegistrationBytes = uint64_t{1} << 20;
bool served_in_bulk(const DecodedRequest& req);

// Who the admin socket serves: root and the daemon's own uid.
inline bool may_administer(uid_t uid) { return uid == 0 || uid == ::geteuid(); }

class UnixServer::Core : public std::enable_shared_from_this<Core> {
 public:
  Core(boost::asio::io_context& io, IpcConfig config, MemoryRegistrar& registrar, NicDirectory& inventory,
       prometheus::Registry& registry);

  Result<Ok> start();
  void stop();
  // Serves one decoded request of `conn`; returns the reply frame (in conn's buffer).
  // An empty span: the reply is sent later (see FlowHandler::export_memory).
  std::span<const std::byte> handle(Connection& conn, DecodedRequest& req, int fd, FrameBuffer& out,
                                    ReplyFds& reply_fds);
  // Any thread: the connection closed; its flows and registrations are released on the control thread.
  void connection_closed(uint64_t conn_id);
  // Worker: serves `req` on the control thread, then resumes `conn` with the reply.
  void forward_to_control(const std::shared_ptr<Connection>& conn, DecodedRequest req);
  // Worker: serves the registration `req` (with its fd, which this closes) on a bulk thread, then
  // resumes `conn` with the reply (Connection::bulk_done).
  void serve_in_bulk(const std::shared_ptr<Connection>& conn, DecodedRequest req, int fd);

  boost::asio::io_context& io_;
  IpcConfig config_;
  MemoryRegistrar& registrar_;
  NicDirectory& inventory_;
  IpcMetrics metrics_;
  RegistrationService service_;
  uint64_t instance_id_;
  FlowHandler* flows_ = nullptr;
  std::function<std::string()> diagnose_extra_;
  AdminHandler* admin_ = nullptr;
  // One listener: the client socket, or the admin socket (admin requests only there).
  struct Listener {
    explicit Listener(boost::asio::io_context& io, bool is_admin) : acceptor(io), retry(io), admin(is_admin) {}
    SeqPacket::acceptor acceptor;
    boost::asio::steady_timer retry;
    bool admin;
    bool activated = false;
    bool created_path = false;
    std::string path;
    std::chrono::milliseconds backoff{0};
  };
  Listener clients_{io_, false};
  Listener admins_{io_, true};
  bool activated_ = false;
  bool stopped_ = false;
  uint64_t next_conn_id_ = 1;
  // Sessions of the previous run (restore()), waiting for their client to come back (kResume) until
  // the grace timer releases them; by token.
  SessionStore* store_ = nullptr;
  std::map<SessionToken, StoredSession> detached_;
  boost::asio::steady_timer grace_timer_{io_};
  // Declared before the connections: their sockets belong to the workers' io_contexts.
  std::vector<std::unique_ptr<ServiceWorker>> workers_;
  std::vector<size_t> worker_load_;  // connections per worker: a new one goes to the least loaded
  BulkPool bulk_;
  FrameBuffer control_tx_{};  // replies built on the control thread
  std::unordered_map<uint64_t, std::shared_ptr<Connection>> connections_;
  std::map<Tenant, uint32_t> connections_by_tenant_;
  FdBudget fds_;  // what clients may make the daemon hold (fd_budget.h)
  // Closed to make room when accept runs out of descriptors, so that the client waiting in the
  // backlog gets an answer (refused) instead of a connection that hangs.
  int spare_fd_ = -1;

 private:
  Result<Ok> bind_socket(Listener& l, uint32_t mode, const std::string& group);
  Result<Ok> listen_on(Listener& l, uint32_t mode, const std::string& group);
  // Adopts the sockets systemd passed for the client and admin paths (matched by path).
  void adopt_systemd_sockets();
  void start_workers();
  void stop_workers();
  // Finishes the bulk registrations queued (their replies go to the workers, still running).
  void stop_bulk();
  void on_closed(uint64_t conn_id);
  // Control thread: gives the previous run's session named by `token` to conn (same uid only).
  proto::ResumeReply resume(const Connection& conn, const SessionToken& token);
  void accept_next(Listener& l);
  void on_accept(SeqPacket::socket accepted, bool admin);
  // accept() failed for want of descriptors: refuse one waiting client, pause with a growing delay.
  void accept_out_of_fds(Listener& l);
  std::span<const std::byte> dispatch(Connection& conn, DecodedRequest& req, int fd, FrameBuffer& out,
                                      ReplyFds& reply_fds, rdmad_status* status);
  std::span<const std::byte> dispatch_flow(Connection& conn, DecodedRequest& req, FrameBuffer& out,
                                           ReplyFds& reply_fds, rdmad_status* status);
  std::span<const std::byte> dispatch_admin(Connection& conn, DecodedRequest& req, FrameBuffer& out,
                                            rdmad_status* status);
};

}  // namespace rdmad::clients
