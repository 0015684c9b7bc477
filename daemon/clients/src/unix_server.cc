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
      instance_id_(random_instance_id()) {
  clients_.path = config_.socket_path;
  admins_.path = config_.admin_socket_path;
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
  if (config_.systemd_activation) adopt_systemd_sockets();
  activated_ = clients_.activated;
  for (auto [l, mode, group] : {std::tuple{&clients_, config_.socket_mode, config_.socket_group},
                                std::tuple{&admins_, uint32_t{0600}, std::string()}}) {
    if (auto bound = listen_on(*l, mode, group); !bound.ok()) {
      stop();
      return bound;
    }
  }
  stopped_ = false;
  start_workers();
  accept_next(clients_);
  if (!admins_.path.empty()) accept_next(admins_);
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

void UnixServer::Core::accept_next(Listener& l) {
  l.acceptor.async_accept([this, &l](boost::system::error_code ec, SeqPacket::socket socket) {
    if (ec == boost::asio::error::operation_aborted || stopped_) return;
    if (ec) {
      accept_out_of_fds(l);
      return;
    }
    l.backoff = std::chrono::milliseconds(0);
    on_accept(std::move(socket), l.admin);
    accept_next(l);
  });
}

void UnixServer::Core::accept_out_of_fds(Listener& l) {
  // Out of descriptors (EMFILE/ENFILE) or another accept error: the listener stays readable, so
  // accepting again at once would spin. Use the spare descriptor to take one waiting client and
  // close it (it learns at once instead of hanging in the backlog), then pause, longer each time.
  if (spare_fd_ >= 0) {
    ::close(spare_fd_);
    spare_fd_ = -1;
    int fd = ::accept4(l.acceptor.native_handle(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) ::close(fd);
    spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  l.backoff = std::clamp(l.backoff * 2, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  base::log_limited(*ipc_log(), g_accept_log, spdlog::level::warn,
                    "client accept failed error={} pause_ms={}", base::q(std::strerror(errno)), l.backoff.count());
  l.retry.expires_after(l.backoff);
  l.retry.async_wait([this, &l](boost::system::error_code tec) {
    if (!tec && !stopped_) accept_next(l);
  });
}

void UnixServer::Core::on_accept(SeqPacket::socket accepted, bool admin) {
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
  Peer peer{next_conn_id_++, cred.uid, cred.gid, cred.pid, admin};
  auto conn = std::make_shared<Connection>(std::move(socket), peer, worker, *this);
  FrameBuffer buf;
  auto refuse = [&](rdmad_status status, const std::string& why) {
    base::log_limited(*ipc_log(), g_accept_log, spdlog::level::warn, "client refused uid={} pid={} reason={}",
                      cred.uid, cred.pid, base::q(why));
    metrics_.request(0, status);
    conn->refuse(write_error(buf, proto::kVersionMin, 0, status, why));
  };
  if (admin && !may_administer(cred.uid))
    return refuse(RDMAD_ERR_PERMISSION, "the admin socket serves root and the daemon's uid " +
                                            std::to_string(::geteuid()) + " only; uid " + std::to_string(cred.uid) +
                                            " is not allowed");
  if (!admin && !peer_allowed(config_, cred, peer_groups(conn->native_handle())))
    return refuse(RDMAD_ERR_PERMISSION,
                  "uid " + std::to_string(cred.uid) + " is not allowed to use rdmad (allowed_uids, allowed_gids)");
  // The tenant is read now, while the process that connected most likely still runs; one that
  // is gone already (or hidden) is refused rather than counted as its uid (tenant.h).
  if (!admin) {
    auto tenant = tenant_of_process(config_.proc_root, cred.pid, cred.uid);
    if (!tenant.ok()) return refuse(tenant.error().status, tenant.error().message);
    peer.pod_uid = tenant.value().pod_uid;
    conn->set_pod(peer.pod_uid);
  }
  if (connections_.size() >= config_.max_clients)
    return refuse(RDMAD_ERR_NO_RESOURCE, "too many clients connected (max_clients " +
                                             std::to_string(config_.max_clients) + ")");
  uint32_t& mine = connections_by_tenant_[peer.tenant()];
  const uint32_t allowed = service_.quota_for(peer.tenant()).max_connections;
  if (mine >= allowed) {
    if (mine == 0) connections_by_tenant_.erase(peer.tenant());
    return refuse(RDMAD_ERR_QUOTA, peer.tenant().name() + " has " + std::to_string(allowed) +
                                       " connections open (its connection quota)");
  }
  if (!fds_.take(1)) {
    if (mine == 0) connections_by_tenant_.erase(peer.tenant());
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
    const Peer owner{h.conn_id, s->second->uid, 0, s->second->pid, false, s->second->pod_uid};
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
  // Another uid's or tenant's token is answered as an unknown one: a token is no use to anyone else.
  if (it == detached_.end() || it->second.uid != conn.peer().uid || it->second.pod_uid != conn.peer().pod_uid)
    return reply;
  const StoredSession old = it->second;
  detached_.erase(it);
  service_.adopt_connection(old.conn_id, conn.peer());
  if (flows_ != nullptr) flows_->adopt_connection(old.conn_id, conn.peer());
  if (store_ != nullptr)
    store_->session_moved(old.conn_id, StoredSession{conn.peer().conn_id, conn.peer().uid, conn.peer().pid, token,
                                                     conn.peer().pod_uid});
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
  if (auto u = connections_by_tenant_.find(it->second->peer().tenant());
      u != connections_by_tenant_.end() && --u->second == 0)
    connections_by_tenant_.erase(u);
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
  for (Listener* l : {&clients_, &admins_}) {
    l->retry.cancel();
    l->acceptor.close(ec);
    if (l->created_path) unlink(l->path.c_str());
    l->created_path = false;
  }
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
