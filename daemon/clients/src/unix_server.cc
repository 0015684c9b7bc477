#include "rdmad/daemon/clients/unix_server.h"

#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "connection.h"
#include "log.h"
#include "rdmad/base/log_fields.h"
#include "rdmad/base/log_limiter.h"

namespace rdmad::clients {
namespace {

uint64_t random_instance_id() {
  std::random_device rd;
  return (uint64_t{rd()} << 32) | rd();
}

std::vector<gid_t> peer_groups(int fd) {
  std::vector<gid_t> groups(64);
  socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
  if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) != 0) {
    if (errno != ERANGE) return {};
    groups.resize(len / sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) != 0) return {};
  }
  groups.resize(len / sizeof(gid_t));
  return groups;
}

bool peer_allowed(const IpcConfig& c, const ucred& cred, const std::vector<gid_t>& groups) {
  if (cred.uid == 0) return true;
  if (c.allowed_uids.empty() && c.allowed_gids.empty()) return true;
  auto has = [](const auto& v, auto x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  if (has(c.allowed_uids, cred.uid) || has(c.allowed_gids, cred.gid)) return true;
  return std::any_of(groups.begin(), groups.end(), [&](gid_t g) { return has(c.allowed_gids, g); });
}

// A live socket at path means another program serves it; only a socket nobody listens on
// (ECONNREFUSED: left over from a crash) is removed. A live socket of another type (a stream socket
// from a unit that says ListenStream=) is reported, never deleted.
Result<Ok> clear_stale_socket(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return Ok{};
  if (!S_ISSOCK(st.st_mode)) return Error{RDMAD_ERR_SYSTEM, path + " exists and is not a socket"};
  int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (probe < 0) return sys_error("socket", errno);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  const int rc = connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  const int err = rc == 0 ? 0 : errno;
  ::close(probe);
  if (rc == 0) return Error{RDMAD_ERR_SYSTEM, "another daemon is serving " + path};
  if (err == EPROTOTYPE)
    return Error{RDMAD_ERR_SYSTEM, "a socket of another type (not SOCK_SEQPACKET) is live at " + path +
                                       " and is left in place; if systemd made it, rdmad.socket must say "
                                       "ListenSequentialPacket=, not ListenStream="};
  if (err != ECONNREFUSED) return sys_error("probe of the socket at " + path, err);
  if (unlink(path.c_str()) != 0) return sys_error("unlink stale " + path, errno);
  return Ok{};
}

// What a descriptor systemd passed is, for the warning when it is not ours to serve.
std::string describe_passed_socket(int fd) {
  if (sd_is_socket_unix(fd, SOCK_STREAM, -1, nullptr, 0) > 0)
    return "a stream socket (ListenStream=; rdmad needs ListenSequentialPacket=)";
  if (sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, nullptr, 0) > 0) return "a listening socket for another path";
  if (sd_is_socket(fd, AF_UNSPEC, 0, -1) > 0) return "not a listening SOCK_SEQPACKET Unix socket";
  return "not a socket";
}

// Log lines a flood of local connections can cause.
base::LogLimiter g_accept_log;

}  // namespace

UnixServer::Core::Core(boost::asio::io_context& io, IpcConfig config, MemoryRegistrar& registrar,
                       NicDirectory& inventory, prometheus::Registry& registry)
    : io_(io),
      config_(std::move(config)),
      registrar_(registrar),
      inventory_(inventory),
      metrics_(registry),
      service_(config_, registrar_, inventory_, &metrics_),
      instance_id_(random_instance_id()),
      acceptor_(io),
      accept_retry_(io) {}

bool UnixServer::Core::adopt_systemd_socket() {
  char** names = nullptr;
  int n = sd_listen_fds_with_names(0, &names);
  std::vector<std::string> fd_names;
  for (int i = 0; i < n; ++i) {
    fd_names.emplace_back(names != nullptr && names[i] != nullptr ? names[i] : "");
    if (names != nullptr) free(names[i]);
  }
  free(names);
  bool adopted = false;
  for (int fd = SD_LISTEN_FDS_START; n > 0 && fd < SD_LISTEN_FDS_START + n; ++fd) {
    // The file-descriptor store's registered memory (session_store.h), not a socket.
    if (fd_names[static_cast<size_t>(fd - SD_LISTEN_FDS_START)].rfind(kStoredMemoryPrefix, 0) == 0) continue;
    if (!adopted && sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, config_.socket_path.c_str(), 0) > 0) {
      boost::system::error_code ec;
      acceptor_.assign(SeqPacket(), fd, ec);
      if (!ec) {
        ipc_log()->info("serving clients socket={} activation=systemd", base::q(config_.socket_path));
        adopted = true;
        continue;
      }
    }
    ipc_log()->warn("passed socket ignored fd={} socket={} reason={}", fd, base::q(config_.socket_path),
                    base::q(describe_passed_socket(fd)));
  }
  return adopted;
}

Result<Ok> UnixServer::Core::bind_socket() {
  const std::string& path = config_.socket_path;
  if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path))
    return Error{RDMAD_ERR_INVALID_ARGUMENT, "socket path empty or longer than 107 bytes: " + path};
  std::error_code fec;
  auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, fec);
  if (fec) return Error{RDMAD_ERR_SYSTEM, "create " + dir.string() + ": " + fec.message()};
  auto cleared = clear_stale_socket(path);
  if (!cleared.ok()) return cleared;
  boost::system::error_code ec;
  acceptor_.open(SeqPacket(), ec);
  if (!ec) acceptor_.bind(SeqPacket::endpoint(path), ec);
  if (ec) return Error{RDMAD_ERR_SYSTEM, "bind " + path + ": " + ec.message()};
  created_path_ = true;
  if (chmod(path.c_str(), config_.socket_mode) != 0) return sys_error("chmod " + path, errno);
  if (!config_.socket_group.empty()) {
    group* g = getgrnam(config_.socket_group.c_str());
    if (g == nullptr)
      return Error{RDMAD_ERR_INVALID_ARGUMENT, "unknown socket group " + config_.socket_group};
    if (chown(path.c_str(), static_cast<uid_t>(-1), g->gr_gid) != 0) return sys_error("chown " + path, errno);
  }
  acceptor_.listen(SOMAXCONN, ec);
  if (ec) return Error{RDMAD_ERR_SYSTEM, "listen " + path + ": " + ec.message()};
  ipc_log()->info("serving clients socket={} mode=0{:o}", base::q(path), config_.socket_mode);
  return Ok{};
}

Result<Ok> UnixServer::Core::start() {
  // Every connection costs a descriptor: raise the limit as far as we may, and never accept more
  // clients than it allows next to what the daemon keeps for itself.
  const uint64_t limit = FdBudget::raise_fd_limit();
  fds_.set(limit, kFdReserve);
  service_.set_fd_budget(&fds_);
  if (config_.max_clients > fds_.total()) {
    ipc_log()->warn("max clients lowered from={} to={} fd_limit={} fd_reserved={} fix=\"raise LimitNOFILE=\"",
                    config_.max_clients, fds_.total(), limit, kFdReserve);
    config_.max_clients = static_cast<uint32_t>(fds_.total());
  }
  if (spare_fd_ < 0) spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  activated_ = config_.systemd_activation && adopt_systemd_socket();
  if (!activated_) {
    auto bound = bind_socket();
    if (!bound.ok()) {
      ipc_log()->error("cannot bind client socket error={}", base::q(bound.error().message));
      stop();
      return bound;
    }
  }
  stopped_ = false;
  start_workers();
  accept_next();
  return Ok{};
}

void UnixServer::Core::start_workers() {
  if (workers_.empty()) {
    size_t n = config_.workers;
    if (n == 0) n = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 4);
    for (size_t i = 0; i < n; ++i) workers_.push_back(std::make_unique<ServiceWorker>());
    worker_load_.assign(n, 0);
    ipc_log()->debug("client workers started threads={}", n);
  }
  if (bulk_.threads.empty()) {
    bulk_.io.restart();  // after stop()
    bulk_.work.emplace(bulk_.io.get_executor());
    for (size_t i = 0; i < workers_.size(); ++i)
      bulk_.threads.emplace_back([io = &bulk_.io, i] {
        pthread_setname_np(pthread_self(), ("rdmad-ipc-bulk" + std::to_string(i)).c_str());
        io->run();
      });
  }
  for (size_t i = 0; i < workers_.size(); ++i) {
    ServiceWorker& w = *workers_[i];
    if (w.thread.joinable()) continue;
    w.io.restart();  // after stop()
    w.work.emplace(w.io.get_executor());
    w.thread = std::thread([io = &w.io, i] {
      pthread_setname_np(pthread_self(), ("rdmad-ipc-" + std::to_string(i)).c_str());
      io->run();
    });
  }
}

void UnixServer::Core::accept_next() {
  acceptor_.async_accept([this](boost::system::error_code ec, SeqPacket::socket socket) {
    if (ec == boost::asio::error::operation_aborted || stopped_) return;
    if (ec) {
      accept_out_of_fds();
      return;
    }
    accept_backoff_ = std::chrono::milliseconds(0);
    on_accept(std::move(socket));
    accept_next();
  });
}

void UnixServer::Core::accept_out_of_fds() {
  // Out of descriptors (EMFILE/ENFILE) or another accept error: the listener stays readable, so
  // accepting again at once would spin. Use the spare descriptor to take one waiting client and
  // close it (it learns at once instead of hanging in the backlog), then pause, longer each time.
  if (spare_fd_ >= 0) {
    ::close(spare_fd_);
    spare_fd_ = -1;
    int fd = ::accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) ::close(fd);
    spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  accept_backoff_ = std::clamp(accept_backoff_ * 2, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  base::log_limited(*ipc_log(), g_accept_log, spdlog::level::warn,
                    "client accept failed error={} pause_ms={}", base::q(std::strerror(errno)),
                    accept_backoff_.count());
  accept_retry_.expires_after(accept_backoff_);
  accept_retry_.async_wait([this](boost::system::error_code tec) {
    if (!tec && !stopped_) accept_next();
  });
}

void UnixServer::Core::on_accept(SeqPacket::socket accepted) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(accepted.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    ipc_log()->warn("cannot read client credentials call=SO_PEERCRED error={}", base::q(std::strerror(errno)));
    return;
  }
  // The connection lives on the least loaded worker from here on.
  const size_t worker = static_cast<size_t>(
      std::min_element(worker_load_.begin(), worker_load_.end()) - worker_load_.begin());
  boost::system::error_code ec;
  SeqPacket::socket socket(workers_[worker]->io);
  socket.assign(SeqPacket(), accepted.release(), ec);
  if (ec) {
    ipc_log()->warn("cannot serve client error={}", base::q(ec.message()));
    return;
  }
  Peer peer{next_conn_id_++, cred.uid, cred.gid, cred.pid};
  auto conn = std::make_shared<Connection>(std::move(socket), peer, worker, *this);
  FrameBuffer buf;
  auto refuse = [&](rdmad_status status, const std::string& why) {
    base::log_limited(*ipc_log(), g_accept_log, spdlog::level::warn, "client refused uid={} pid={} reason={}",
                      cred.uid, cred.pid, base::q(why));
    metrics_.request(0, status);
    conn->refuse(write_error(buf, proto::kVersionMin, 0, status, why));
  };
  if (!peer_allowed(config_, cred, peer_groups(conn->native_handle())))
    return refuse(RDMAD_ERR_PERMISSION,
                  "uid " + std::to_string(cred.uid) + " is not allowed to use rdmad (allowed_uids, allowed_gids)");
  if (connections_.size() >= config_.max_clients)
    return refuse(RDMAD_ERR_NO_RESOURCE, "too many clients connected (max_clients " +
                                             std::to_string(config_.max_clients) + ")");
  uint32_t& mine = connections_by_uid_[cred.uid];
  const uint32_t allowed = service_.quota_for(cred.uid).max_connections;
  if (mine >= allowed) {
    if (mine == 0) connections_by_uid_.erase(cred.uid);
    return refuse(RDMAD_ERR_QUOTA, "uid " + std::to_string(cred.uid) + " has " + std::to_string(allowed) +
                                       " connections open (its connection quota)");
  }
  if (!fds_.take(1)) {
    if (mine == 0) connections_by_uid_.erase(cred.uid);
    return refuse(RDMAD_ERR_NO_RESOURCE, "the daemon is out of file descriptors for clients");
  }
  ++mine;
  ++worker_load_[worker];
  connections_.emplace(peer.conn_id, conn);
  metrics_.client_connected();
  boost::asio::post(workers_[worker]->io, [conn] { conn->start(); });
}

void UnixServer::Core::connection_closed(uint64_t conn_id) {
  boost::asio::post(io_, [weak = weak_from_this(), conn_id] {
    if (auto core = weak.lock()) core->on_closed(conn_id);
  });
}

size_t UnixServer::restore(const RestoredState& state, std::chrono::milliseconds grace) {
  Core& c = *core_;
  std::map<uint64_t, const StoredSession*> sessions;
  for (const auto& s : state.sessions) sessions[s.conn_id] = &s;
  size_t restored = 0;
  for (const auto& h : state.handles) {
    auto s = sessions.find(h.conn_id);
    auto fd = state.region_fds.find(h.region_seq);
    if (s == sessions.end() || fd == state.region_fds.end()) continue;
    const Peer owner{h.conn_id, s->second->uid, 0, s->second->pid};
    auto r = c.service_.restore(owner, fd->second, h);
    if (!r.ok()) {
      ipc_log()->warn("registration not restored handle={} uid={} error={}", h.handle, owner.uid,
                      base::q(r.error().message));
      continue;
    }
    ++restored;
  }
  c.service_.reserve_handles(state.max_handle);
  c.next_conn_id_ = std::max(c.next_conn_id_, state.max_conn_id + 1);
  for (const auto& s : state.sessions)
    if (c.service_.holds_registrations(s.conn_id)) c.detached_[s.token] = s;
  if (!c.detached_.empty()) {
    c.grace_timer_.expires_after(grace);
    c.grace_timer_.async_wait([weak = std::weak_ptr<Core>(core_)](const boost::system::error_code& ec) {
      auto core = weak.lock();
      if (ec || !core || core->stopped_) return;
      for (const auto& [token, s] : core->detached_) {
        ipc_log()->info("restored session expired uid={} pid={} reason=no_resume", s.uid, s.pid);
        if (core->flows_ != nullptr) core->flows_->connection_closed(s.conn_id);
        core->service_.release_connection(s.conn_id);
      }
      core->detached_.clear();
    });
  }
  return restored;
}

size_t UnixServer::detached_sessions() const { return core_->detached_.size(); }

proto::ResumeReply UnixServer::Core::resume(const Connection& conn, const SessionToken& token) {
  proto::ResumeReply reply{};
  auto it = detached_.find(token);
  // Another uid's token is answered as an unknown one: a token is no use to anyone else.
  if (it == detached_.end() || it->second.uid != conn.peer().uid) return reply;
  const StoredSession old = it->second;
  detached_.erase(it);
  service_.adopt_connection(old.conn_id, conn.peer());
  if (flows_ != nullptr) flows_->adopt_connection(old.conn_id, conn.peer());
  if (store_ != nullptr) store_->session_moved(old.conn_id, StoredSession{conn.peer().conn_id, conn.peer().uid,
                                                                          conn.peer().pid, token});
  bool more = false;
  reply.resumed = 1;
  reply.handles = static_cast<uint32_t>(service_.list(conn.peer().conn_id, 0, UINT32_MAX, &more).size());
  ipc_log()->info("session resumed uid={} pid={} handles={}", conn.peer().uid, conn.peer().pid, reply.handles);
  return reply;
}

void UnixServer::Core::on_closed(uint64_t conn_id) {
  auto it = connections_.find(conn_id);
  if (it == connections_.end()) return;
  if (flows_ != nullptr) flows_->connection_closed(conn_id);
  service_.release_connection(conn_id);
  metrics_.client_disconnected();
  const uid_t uid = it->second->peer().uid;
  if (auto u = connections_by_uid_.find(uid); u != connections_by_uid_.end() && --u->second == 0)
    connections_by_uid_.erase(u);
  --worker_load_[it->second->worker()];
  fds_.give(1);
  connections_.erase(it);
}

void UnixServer::Core::stop() {
  stopped_ = true;
  // What the state file says now is what the next start restores: releasing the connections
  // below must not be recorded as their clients leaving.
  if (store_ != nullptr) store_->freeze();
  grace_timer_.cancel();
  boost::system::error_code ec;
  accept_retry_.cancel();
  acceptor_.close(ec);
  if (created_path_) unlink(config_.socket_path.c_str());
  created_path_ = false;
  stop_bulk();
  stop_workers();
  if (spare_fd_ >= 0) ::close(spare_fd_);
  spare_fd_ = -1;
}

void UnixServer::Core::stop_bulk() {
  bulk_.work.reset();
  for (auto& t : bulk_.threads) t.join();
  bulk_.threads.clear();
}

void UnixServer::Core::stop_workers() {
  // Each connection is closed on its worker; then the workers finish what is queued and exit.
  std::vector<std::vector<std::shared_ptr<Connection>>> owned(workers_.size());
  for (auto& [id, conn] : connections_) owned[conn->worker()].push_back(conn);
  for (size_t i = 0; i < workers_.size(); ++i) {
    boost::asio::post(workers_[i]->io, [conns = std::move(owned[i])] {
      for (const auto& c : conns) c->close();
    });
    workers_[i]->work.reset();
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
    w->sparse.clear();
    w->busy.clear();
    w->turn_posted = false;
  }
  // Released now rather than from the control queue: the owner may destroy the server next.
  std::vector<uint64_t> ids;
  for (const auto& [id, conn] : connections_) ids.push_back(id);
  for (uint64_t id : ids) on_closed(id);
}

UnixServer::UnixServer(boost::asio::io_context& io, IpcConfig config, MemoryRegistrar& registrar,
                       NicDirectory& inventory, prometheus::Registry& registry)
    : core_(std::make_shared<Core>(io, std::move(config), registrar, inventory, registry)) {}

UnixServer::~UnixServer() { core_->stop(); }

Result<Ok> UnixServer::start() { return core_->start(); }
void UnixServer::stop() { core_->stop(); }
bool UnixServer::socket_activated() const { return core_->activated_; }
size_t UnixServer::client_count() const { return core_->connections_.size(); }
const RegistrationService& UnixServer::service() const { return core_->service_; }
RegistrationService& UnixServer::registrations() { return core_->service_; }
void UnixServer::set_session_store(SessionStore* store) {
  core_->store_ = store;
  core_->service_.set_session_store(store);
}
void UnixServer::set_flow_handler(FlowHandler* handler) { core_->flows_ = handler; }
void UnixServer::set_diagnose_extra(std::function<std::string()> extra) { core_->diagnose_extra_ = std::move(extra); }
void UnixServer::set_admin_handler(AdminHandler* handler) { core_->admin_ = handler; }
const IpcConfig& UnixServer::config() const { return core_->config_; }
FdBudget& UnixServer::fd_budget() { return core_->fds_; }

}  // namespace rdmad::clients
