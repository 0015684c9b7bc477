// FlowService: lifecycle, flows (rings and fds) and the peer sessions.
#include "rdmad/daemon/flow/flow_service.h"

#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cstring>
#include <fmt/format.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "engine_state.h"
#include "flow_metric_table.h"
#include "peer_domain.h"
#include "rdmad/base/log_fields.h"
#include "rdmad/base/trace_points.h"
#include "rdmad/daemon/peer/peer_channel.h"
#include "rdmad/daemon/peer/peer_session.h"
#include "service_state.h"

namespace rdmad::flow {
namespace {

// A NIC's completion queue for its lanes; an error names the NIC.
verbs::Result<std::unique_ptr<verbs::CompletionQueue>> lane_cq(const std::string& nic, verbs::Device& device,
                                                               uint32_t depth) {
  auto cq = device.create_cq(depth);
  if (!cq.ok()) return base::Status::error("nic " + nic + ": cannot create a completion queue: " + cq.status().message());
  return cq;
}

// Why a flow's nic_mask is refused ("" when it is fine): every bit must name a NIC of this node.
std::string check_nic_mask(uint32_t mask, size_t nics) {
  const uint32_t known = nics >= 32 ? ~0u : (1u << nics) - 1;
  if ((mask & ~known) == 0) return {};
  const int first = __builtin_ctz(mask & ~known);
  return fmt::format("nic_mask {:#x} names NIC {}, which this node does not have (it has {} NICs, rdmad_query_nics)",
                     mask, first, nics);
}

}  // namespace

FlowService::FlowService(boost::asio::io_context& io, FlowServiceOptions options, std::vector<FlowNic> nics,
                         clients::RegionPins& registrations, prometheus::Registry& registry)
    : io_(io), options_(std::move(options)), nics_(std::move(nics)), registrations_(registrations), registry_(registry) {}

FlowService::~FlowService() { stop(); }

base::Status FlowService::start() {
  if (nics_.empty()) return base::Status::error("flows need at least one [[nic]]");
  std::vector<std::string> names;
  std::vector<verbs::CompletionQueue*> cqs;
  for (const FlowNic& n : nics_) {
    names.push_back(n.name);
    cqs_.emplace_back();
    cqs.push_back(nullptr);
    if (n.device_ptr == nullptr) continue;  // out of service: nic_opened() gives it one
    auto cq = lane_cq(n.name, *n.device_ptr, kCqDepth);
    if (!cq.ok()) return cq.status();
    cqs.back() = cq.value().get();
    cqs_.back() = std::move(cq.value());
  }
  duration_ = &metrics::build_histogram(metric::kTransferDuration, registry_)
                   .Add({}, prometheus::Histogram::BucketBoundaries{1e-5, 1e-4, 1e-3, 4e-3, 16e-3, 64e-3, 0.25,
                                                                    1.0, 4.0, 16.0});
  std::weak_ptr<int> alive = alive_;
  auto post = [this, alive](std::function<void()> f) {
    boost::asio::post(io_, [alive, f = std::move(f)] {
      if (alive.lock()) f();
    });
  };
  ControlHooks hooks;
  hooks.mail = [this, post](const std::string& peer, const peer::Mail& m) {
    post([this, peer, m] {
      if (std::holds_alternative<peer::RecvPost>(m)) base::trace::mark(base::trace::Point::kRecvPostSent);
      channel_->send(peer, peer::frame_type(m), peer::encode(m));
    });
  };
  // After the lane's rebuild offer (lane_failed's hook posts it first): the peer takes the lane's
  // QPs down before it answers.
  hooks.recv_query = [this, post](const std::string& peer, const peer::RecvQuery& m) {
    post([this, peer, m] { channel_->send(peer, peer::MessageType::kRecvQuery, peer::encode(m)); });
  };
  hooks.lane_failed = [this, post](const std::string& peer, uint16_t nic, const std::string&,
                                    peer::RebuildCause cause) {
    // A fresh QP pair for that NIC, through the control channel; the balancer lets it rejoin after
    // its back-off, and a path still broken fails it again (with a longer back-off).
    post([this, peer, nic, cause] {
      if (!port_down_[nic]) session_->rebuild(peer, nic, cause);  // else when the port is back
    });
  };
  hooks.reap_registrations = [this, post] { post([this] { registrations_.reap(); }); };
  registrations_.set_reaper(hooks.reap_registrations);
  EngineOptions eo;
  eo.balancer = options_.balancer;
  eo.lane_window_chunks = options_.lane_window_chunks;
  eo.max_receives_per_peer = options_.max_receives_per_peer;
  engine_ = std::make_unique<FlowEngine>(eo, names, cqs, registrations_, hooks, duration_);

  for (size_t i = 0; i < nics_.size(); ++i) local_.push_back(local_nic(i));
  channel_ = std::make_unique<peer::PeerChannel>(io_, options_.peer);
  // A peer's QPs live in its own protection domains (peer_domain.h).
  session_ = std::make_unique<peer::PeerSession>(
      *channel_, [this, qp = options_.qp](const std::string& p) -> std::unique_ptr<peer::QpConnector> {
        std::string why;  // logged by domain_for
        PeerDomain* domain = domain_for(p, &why);
        if (domain == nullptr) return nullptr;
        auto nics = local_;
        for (size_t i = 0; i < nics.size(); ++i) nics[i].pd = domain->pd(i);
        return std::make_unique<peer::QpConnector>(std::move(nics), qp);
      });
  session_->set_on_ready([this](const std::string& p, peer::QpConnector& qps) { on_peer_ready(p, qps); });
  session_->set_on_lost([this](const std::string& p) { on_peer_lost(p); });
  session_->set_on_closed([this](const std::string& p) { on_peer_closed(p); });
  session_->set_on_nic_replacing([this](const std::string& p, uint16_t nic, peer::RebuildCause cause) {
    engine_->run_sync([&] { engine_->lane_replacing(p, nic, cause); });
  });
  session_->set_on_nic_rebuilt([this](const std::string& p, uint16_t nic, peer::QpConnector& qps) {
    const std::vector<verbs::QueuePair*> lane = qps.nic_qps(nic);
    engine_->run_sync([&] { engine_->lane_rebuilt(p, nic, lane); });
  });
  session_->set_on_message([this](const std::string& p, peer::MessageType type, std::span<const uint8_t> payload) {
    on_peer_message(p, static_cast<uint16_t>(type), std::vector<uint8_t>(payload.begin(), payload.end()));
  });
  engine_->start();
  if (base::Status st = channel_->start(); !st.ok()) {
    engine_->stop();
    return st;
  }
  collector_ = make_collector();
  start_lazy();
  // A port that is not ACTIVE now gets no QPs (QpConnector) and no rebuilds until it comes up.
  port_down_.assign(nics_.size(), false);
  for (size_t i = 0; i < nics_.size(); ++i) port_down_[i] = !port_active(i);
  if (options_.balancer.policy == balancer::Policy::kCongestionAware) {
    congestion_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
    last_cnps_.assign(nics_.size(), 0);
    for (size_t i = 0; i < nics_.size(); ++i)
      last_cnps_[i] = nics_[i].device_ptr != nullptr ? nics_[i].device_ptr->counters().rp_cnp_handled : 0;
    last_sample_ = std::chrono::steady_clock::now();
    sample_congestion();
  }
  started_ = true;
  return base::Status::success();
}

void FlowService::stop() {
  if (!started_) return;
  started_ = false;
  if (congestion_timer_) congestion_timer_->cancel();
  if (lazy_timer_) lazy_timer_->cancel();
  {
    std::vector<Waiter> waiting = std::move(waiters_);
    waiters_.clear();
    const clients::Error stopping{RDMAD_ERR_PEER, "the daemon is stopping"};
    for (Waiter& w : waiting) w.go(&stopping);
  }
  channel_->stop();
  while (!flows_.empty()) destroy_flow(flows_.begin()->second);
  while (!exports_.empty()) drop_export(exports_.begin(), false);
  engine_->stop();
  // The registrations' MRs in the peers' domains go now; the domains with the sessions' QPs.
  for (const auto& [peer, d] : domains_) registrations_.drop_domain(d->id());
  // The objects stay until destruction (sessions and their QPs first, then the CQs): a scrape
  // may still read their counters.
  registrations_.set_reaper({});
  registrations_.reap();
}

const base::Heartbeat* FlowService::engine_heartbeat() const { return engine_ ? &engine_->heartbeat() : nullptr; }

void FlowService::run_on_engine_for_test(const std::function<void()>& fn) {
  if (engine_) engine_->run_sync(fn);
}

peer::LocalNic FlowService::local_nic(size_t i) const {
  peer::LocalNic l;
  l.name = nics_[i].name;
  l.device = nics_[i].device_ptr;
  l.send_cq = cqs_[i].get();
  l.recv_cq = cqs_[i].get();
  l.port = nics_[i].port;
  l.advertise_gid = nics_[i].advertise_gid;
  l.advertise_udp_port = nics_[i].advertise_udp_port;
  return l;
}

bool FlowService::port_active(size_t nic) const {
  if (nics_[nic].device_ptr == nullptr) return false;
  const auto p = nics_[nic].device_ptr->query_port(nics_[nic].port);
  return p.ok() && p.value().state == verbs::PortState::kActive;
}

base::Status FlowService::nic_opened(size_t nic, verbs::Device* device) {
  if (!started_ || nic >= nics_.size() || nics_[nic].device_ptr != nullptr || device == nullptr)
    return base::Status::error("nic " + std::to_string(nic) + ": not a NIC out of service in running flows");
  auto cq = lane_cq(nics_[nic].name, *device, kCqDepth);
  if (!cq.ok()) return cq.status();
  for (auto& [peer, d] : domains_) {
    if (const verbs::Status st = d->add_nic(nic, *device); !st.ok())
      return base::Status::error("nic " + nics_[nic].name + ": peer " + peer + ": " + st.message());
  }
  nics_[nic].device_ptr = device;
  nics_[nic].device = device->info().name;
  cqs_[nic] = std::move(cq.value());
  verbs::CompletionQueue* raw = cqs_[nic].get();
  const auto n = static_cast<uint16_t>(nic);
  engine_->run_sync([&] { engine_->set_cq(n, raw); });
  local_[nic] = local_nic(nic);
  session_->set_nic(n, [&](const std::string& peer) {
    peer::LocalNic l = local_[nic];
    auto it = domains_.find(peer);
    l.pd = it != domains_.end() ? it->second->pd(nic) : nullptr;
    return l;
  });
  // Its lanes come up as for a port that came back.
  port_down_[nic] = true;
  if (port_active(nic)) port_changed(nic, true);
  return base::Status::success();
}

void FlowService::qp_failed(size_t nic, uint32_t qp_num) {
  if (!started_ || nic >= nics_.size()) return;
  const auto n = static_cast<uint16_t>(nic);
  engine_->run_sync([&] { engine_->qp_failed(n, qp_num); });
}

void FlowService::gid_changed(size_t nic) {
  if (!started_ || nic >= nics_.size() || port_down_[nic]) return;
  // The peers address this NIC by its old GID, and its QPs send from it: fresh QPs with the new
  // one, re-advertised in the rebuild offer. A NIC left without a GID fails the rebuild and
  // waits for the next change.
  for (const std::string& peer : session_->ready_peers()) session_->rebuild(peer, static_cast<uint16_t>(nic));
}

void FlowService::port_changed(size_t nic, bool up) {
  if (!started_ || nic >= nics_.size() || port_down_[nic] == !up) return;
  port_down_[nic] = !up;
  if (!up) {
    const auto n = static_cast<uint16_t>(nic);
    engine_->run_sync([&] { engine_->nic_down(n, "port down"); });
    return;
  }
  for (const std::string& peer : session_->ready_peers()) session_->rebuild(peer, static_cast<uint16_t>(nic));
}

void FlowService::sample_congestion() {
  // Per NIC: CNPs its reaction points handled per second since the last sample and their mean
  // DCQCN rate (the balancer's congestion_aware inputs). Per NIC, not per path: a NIC's CNPs come
  // from all its peers.
  const auto now = std::chrono::steady_clock::now();
  const double dt = std::chrono::duration<double>(now - last_sample_).count();
  last_sample_ = now;
  for (size_t i = 0; i < nics_.size() && dt > 0; ++i) {
    if (nics_[i].device_ptr == nullptr) continue;
    const uint64_t cnps = nics_[i].device_ptr->counters().rp_cnp_handled;
    const double cnp_rate = static_cast<double>(cnps - last_cnps_[i]) / dt;
    last_cnps_[i] = cnps;
    // The software reaction points' mean pacing rate (hardware NICs keep theirs in firmware: 0,
    // no cap).
    double sum = 0;
    const auto samples = nics_[i].device_ptr->dcqcn_samples();
    for (const auto& s : samples) sum += s.rate_mbps;
    const double dcqcn_mbps = samples.empty() ? 0 : sum / static_cast<double>(samples.size());
    const auto n = static_cast<uint16_t>(i);
    engine_->run_sync([&] { engine_->set_congestion(n, cnp_rate, dcqcn_mbps); });
  }
  congestion_timer_->expires_after(std::chrono::milliseconds(500));
  std::weak_ptr<int> alive = alive_;
  congestion_timer_->async_wait([this, alive](const boost::system::error_code& ec) {
    if (!ec && alive.lock() && started_) sample_congestion();
  });
}

uint16_t FlowService::peer_port() const { return channel_ ? channel_->listen_port() : 0; }

PeerDomain* FlowService::domain_for(const std::string& peer, std::string* error) {
  if (auto it = domains_.find(peer); it != domains_.end()) return it->second.get();
  std::vector<verbs::Device*> devices;
  for (const FlowNic& n : nics_) devices.push_back(n.device_ptr);
  auto d = PeerDomain::open(next_domain_id_++, devices, options_.slice_reader);
  if (!d.ok()) {
    *error = d.status().message();
    flow_log()->error("peer flow error peer={} error={}", peer, base::q(*error));
    return nullptr;
  }
  return domains_.emplace(peer, std::move(d.value())).first->second.get();
}

void FlowService::on_peer_ready(const std::string& peer, peer::QpConnector& qps) {
  std::vector<std::vector<verbs::QueuePair*>> lanes(nics_.size());
  for (uint16_t i = 0; i < lanes.size(); ++i) lanes[i] = qps.nic_qps(i);
  std::string error;
  const PeerDomain* domain = domain_for(peer, &error);  // the one the connector's QPs are in
  const uint32_t session = session_->session_of(peer);
  engine_->run_sync([&] { engine_->peer_ready(peer, lanes, domain, session); });
  // Grants do not outlive a session (the peer may have restarted): send ours again, registered
  // in this session's domain.
  for (auto it = exports_.begin(); it != exports_.end();) {
    auto next = std::next(it);
    if (it->second.peer == peer) grant(it);
    it = next;
  }
  resume_waiters(peer);
}

void FlowService::on_peer_lost(const std::string& peer) {
  engine_->run_sync([&] { engine_->peer_lost(peer); });
}

void FlowService::on_peer_closed(const std::string& peer) {
  // Its grants die with the connection, whether or not its QPs ever came up.
  std::erase_if(grants_, [&](const auto& kv) { return kv.second->from == peer; });
  grants_by_peer_.erase(peer);
  set_grants_held();
  // The imports stay (same remote handles) and get their keys when the peer grants again.
  engine_->run_sync([&] { engine_->await_grants(peer); });
  for (auto& [token, e] : exports_) {
    if (e.peer != peer) continue;
    e.mrs.reset();  // its domain goes: registered again in the next session's
    if (e.done == nullptr) continue;
    auto done = std::move(e.done);
    e.done = nullptr;
    done(clients::Error{RDMAD_ERR_PEER, "peer " + peer + " was lost before it acknowledged the export"});
  }
  if (auto it = domains_.find(peer); it != domains_.end()) {
    registrations_.drop_domain(it->second->id());
    domains_.erase(it);
  }
}

void FlowService::open_flow(const clients::Peer& client, const proto::FlowOpenRequest& req,
                            std::function<void(clients::Result<clients::FlowOpened>)> done) {
  const std::string peer(req.peer);
  if (peer != options_.peer.node_id && check_nic_mask(req.nic_mask, nics_.size()).empty() &&
      needs_session_wait(peer)) {
    // Opened once its session is up (or refused when the wait ends); its limits are checked then.
    wait_for_session(client.conn_id, peer, [this, client, req, done](const clients::Error* e) {
      if (e != nullptr) return done(*e);
      done(create_flow(client, req));
    });
    return;
  }
  done(create_flow(client, req));
}

clients::Result<clients::FlowOpened> FlowService::create_flow(const clients::Peer& client, const proto::FlowOpenRequest& req) {
  size_t mine = waiting_of(client.conn_id);
  for (const auto& [id, f] : flows_) mine += f.conn_id == client.conn_id;
  if (mine >= options_.max_flows_per_client)
    return clients::Error{RDMAD_ERR_NO_RESOURCE, "this connection already has " + std::to_string(mine) +
                                                 " flows (max_flows_per_client)"};
  const uint32_t quota = registrations_.quota_for(client.tenant()).max_flows;
  if (flows_by_tenant_[client.tenant()] >= quota)
    return clients::Error{RDMAD_ERR_QUOTA,
                          client.tenant().name() + " has " + std::to_string(quota) + " flows open (its flow quota)"};
  const std::string peer(req.peer);
  if (peer == options_.peer.node_id) return clients::Error{RDMAD_ERR_INVALID_ARGUMENT, "a flow needs another node, not this one"};
  if (auto e = check_nic_mask(req.nic_mask, nics_.size()); !e.empty()) return clients::Error{RDMAD_ERR_INVALID_ARGUMENT, e};
  const uint32_t sq = req.sq_depth != 0 ? req.sq_depth : options_.sq_depth;
  const uint32_t cq = req.cq_depth != 0 ? req.cq_depth : options_.cq_depth;
  if (cq < sq) return clients::Error{RDMAD_ERR_INVALID_ARGUMENT, "cq_depth must be at least sq_depth"};
  if (fds_ != nullptr && !fds_->take(clients::kFdsPerFlow))
    return clients::Error{RDMAD_ERR_NO_RESOURCE, "the daemon is out of file descriptors for flows"};
  FlowRecord f;
  f.id = next_flow_id_++;
  f.conn_id = client.conn_id;
  f.owner_uid = client.uid;
  f.owner_tenant = client.tenant();
  f.owner_pid = client.pid;
  f.peer = peer;
  f.channel = req.channel;
  f.sq_depth = sq;
  f.cq_depth = cq;
  const ring::Layout l = ring::layout_for(sq, cq);
  f.ring_bytes = l.total_bytes;
  f.memfd = ::memfd_create("rdmad-flow", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (f.memfd < 0) {
    if (fds_ != nullptr) fds_->give(clients::kFdsPerFlow);
    return clients::sys_error("memfd_create", errno);
  }
  if (::ftruncate(f.memfd, static_cast<off_t>(l.total_bytes)) != 0 ||
      ::fcntl(f.memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    auto e = clients::sys_error("sizing the flow's memfd", errno);
    ::close(f.memfd);
    if (fds_ != nullptr) fds_->give(clients::kFdsPerFlow);
    return e;
  }
  f.ring = ::mmap(nullptr, l.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f.memfd, 0);
  f.doorbell_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  f.completion_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (f.ring == MAP_FAILED || f.doorbell_fd < 0 || f.completion_fd < 0) {
    auto e = clients::sys_error("setting up the flow's ring", errno);
    if (f.ring == MAP_FAILED) f.ring = nullptr;
    ++flows_by_tenant_[f.owner_tenant];  // destroy_flow gives back what the flow took
    destroy_flow(f);
    return e;
  }
  ring::init_header(f.ring, f.id, sq, cq);
  FlowSetup s{f.id, f.conn_id, peer, req.channel, client.uid, f.ring, sq, cq, f.doorbell_fd, f.completion_fd, req.nic_mask};
  engine_->run_sync([&] { engine_->add_flow(s); });
  clients::FlowOpened out;
  out.reply.flow_id = f.id;
  out.reply.ring_bytes = f.ring_bytes;
  out.reply.sq_depth = sq;
  out.reply.cq_depth = cq;
  out.reply.state = static_cast<const ring::Header*>(f.ring)->flow_state.load();
  out.fds = {f.memfd, f.doorbell_fd, f.completion_fd};
  ++flows_by_tenant_[f.owner_tenant];
  flows_.emplace(f.id, f);
  return out;
}

std::vector<proto::FlowEntry> FlowService::list_flows(uint64_t after, uint32_t max_entries,
                                                      bool* more) const {
  std::vector<proto::FlowEntry> out;
  *more = false;
  for (auto it = flows_.upper_bound(after); it != flows_.end(); ++it) {
    if (out.size() == max_entries) {
      *more = true;
      break;
    }
    const FlowRecord& f = it->second;
    proto::FlowEntry e{};
    e.flow_id = f.id;
    e.channel = f.channel;
    proto::copy_cstr(e.peer, f.peer.c_str());
    e.owner_uid = static_cast<uint32_t>(f.owner_uid);
    e.owner_pid = static_cast<int32_t>(f.owner_pid);
    proto::copy_cstr(e.owner_pod, f.owner_tenant.pod_uid.c_str());
    e.sq_depth = f.sq_depth;
    e.cq_depth = f.cq_depth;
    if (f.ring != nullptr) {
      const auto* h = static_cast<const ring::Header*>(f.ring);
      e.state = h->flow_state.load(std::memory_order_relaxed);
      // sq_tail is the client's: a broken client may show any value; one SQE completes as one CQE.
      const uint32_t submitted = h->sq_tail.load(std::memory_order_relaxed);
      e.in_flight = std::min(submitted - h->cq_tail.load(std::memory_order_relaxed), f.sq_depth + f.cq_depth);
    }
    out.push_back(e);
  }
  return out;
}

std::vector<proto::PeerEntry> FlowService::list_peers(uint64_t skip, uint32_t max_entries, bool* more) const {
  std::vector<proto::PeerEntry> out;
  *more = false;
  if (!channel_) return out;
  const auto peers = channel_->peers();
  for (size_t i = skip; i < peers.size(); ++i) {
    if (out.size() == max_entries) {
      *more = true;
      break;
    }
    const auto& p = peers[i];
    proto::PeerEntry e{};
    proto::copy_cstr(e.node_id, p.node_id.c_str());
    proto::copy_cstr(e.address, p.address.c_str());
    proto::copy_cstr(e.last_error, p.last_error.c_str());
    e.since_unix_ms = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(p.since.time_since_epoch()).count());
    e.rtt_us = static_cast<uint64_t>(p.rtt.count());
    using Source = peer::PeerChannel::PeerStatus::Source;
    e.dialled = static_cast<uint32_t>(p.source == Source::kStatic ? proto::PeerSource::kStatic
                                      : p.source == Source::kDns  ? proto::PeerSource::kDns
                                                                  : proto::PeerSource::kAccepted);
    e.rails = static_cast<uint32_t>(nics_.size());
    using State = peer::PeerChannel::PeerStatus::State;
    e.state = static_cast<uint32_t>(p.state == State::kConnected    ? proto::PeerState::kConnected
                                    : p.state == State::kConnecting ? proto::PeerState::kConnecting
                                                                    : proto::PeerState::kDown);
    if (const peer::QpConnector* qps = p.state == State::kConnected ? session_->ready(p.node_id) : nullptr) {
      e.state = static_cast<uint32_t>(proto::PeerState::kReady);
      std::vector<bool> up(nics_.size());
      for (const auto& q : qps->qps())
        if (q.connected && q.nic_index < up.size()) up[q.nic_index] = true;
      e.rails_up = static_cast<uint32_t>(std::count(up.begin(), up.end(), true));
    }
    out.push_back(e);
  }
  return out;
}

void FlowService::destroy_flow(FlowRecord& f) {
  const uint64_t id = f.id;
  if (engine_) engine_->run_sync([&] { engine_->remove_flow(id); });
  erase_imports([&](const Import& i) { return i.flow_id == id; });
  if (f.ring != nullptr) ::munmap(f.ring, f.ring_bytes);
  for (int fd : {f.memfd, f.doorbell_fd, f.completion_fd})
    if (fd >= 0) ::close(fd);
  if (fds_ != nullptr) fds_->give(clients::kFdsPerFlow);
  if (auto u = flows_by_tenant_.find(f.owner_tenant); u != flows_by_tenant_.end() && --u->second == 0)
    flows_by_tenant_.erase(u);
  flows_.erase(id);
}

clients::Result<clients::Ok> FlowService::close_flow(const clients::Peer& client, uint64_t flow_id) {
  auto it = flows_.find(flow_id);
  if (it == flows_.end()) return clients::Error{RDMAD_ERR_NOT_FOUND, "no flow " + std::to_string(flow_id)};
  if (it->second.conn_id != client.conn_id)
    return clients::Error{RDMAD_ERR_PERMISSION, "flow " + std::to_string(flow_id) + " belongs to another connection"};
  destroy_flow(it->second);
  return clients::Ok{};
}

void FlowService::connection_closed(uint64_t conn_id) {
  std::erase_if(waiters_, [&](const Waiter& w) { return w.conn_id == conn_id; });
  std::vector<uint64_t> ids;
  for (const auto& [id, f] : flows_)
    if (f.conn_id == conn_id) ids.push_back(id);
  for (uint64_t id : ids) destroy_flow(flows_.at(id));
  // A session the daemon keeps across its restart (it is stopping, the store holds the session)
  // comes back with its exports: the peers are not told to revoke them, so their flows' imports
  // get the same grants again from the next run.
  const bool kept = store_ != nullptr && store_->kept_at_stop(conn_id);
  for (auto it = exports_.begin(); it != exports_.end();) {
    auto next = std::next(it);
    if (it->second.conn_id == conn_id) drop_export(it, !kept);
    it = next;
  }
}

}  // namespace rdmad::flow
