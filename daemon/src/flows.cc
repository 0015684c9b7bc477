// Daemon::start_flows: the [peer] and [flow] sections turned into a FlowService on the NICs.
#include <unistd.h>

#include <fmt/format.h>

#include "rdmad/base/log_fields.h"
#include "rdmad/daemon/daemon.h"
#include "rdmad/base/log.h"
#include "rdmad/metrics/exporter.h"
#include "rdmad/verbs/types.h"

namespace rdmad::daemon {
namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

}  // namespace

std::string node_id_of(const config::Config& c) { return c.peer.node_id.empty() ? host_name() : c.peer.node_id; }

namespace {

flow::FlowServiceOptions flow_options(const config::Config& c) {
  flow::FlowServiceOptions o;
  peer::PeerConfig& p = o.peer;
  p.node_id = node_id_of(c);
  p.listen_host = c.peer.listen_host;
  p.listen_port = static_cast<uint16_t>(c.peer.listen_port);
  p.tls_ca_file = c.peer.tls_ca_file;
  p.tls_cert_file = c.peer.tls_cert_file;
  p.tls_key_file = c.peer.tls_key_file;
  p.tls_san_uri_prefix = c.peer.tls_san_uri_prefix;
  p.key_file = c.peer.key_file;
  p.insecure = c.peer.insecure;
  p.handshake_timeout = std::chrono::milliseconds(c.peer.handshake_timeout_ms);
  p.max_handshakes = static_cast<uint32_t>(c.peer.max_handshakes);
  p.max_handshakes_per_source = static_cast<uint32_t>(c.peer.max_handshakes_per_source);
  p.send_queue_bytes = static_cast<uint64_t>(c.peer.send_queue_bytes);
  p.keepalive_interval = std::chrono::milliseconds(c.peer.keepalive_interval_ms);
  p.keepalive_misses = static_cast<uint32_t>(c.peer.keepalive_misses);
  p.reconnect_min = std::chrono::milliseconds(c.peer.reconnect_min_ms);
  p.reconnect_max = std::chrono::milliseconds(c.peer.reconnect_max_ms);
  for (const auto& n : c.peers) p.peers.push_back({n.node_id, n.host, static_cast<uint16_t>(n.port)});
  p.discover = c.peer.discover;
  p.discover_port = static_cast<uint16_t>(c.peer.discover_port);
  p.discover_interval = std::chrono::milliseconds(c.peer.discover_interval_ms);
  p.idle_session = std::chrono::milliseconds(c.peer.idle_session_ms);
  // Each lane's QPs; the peer's side may have fewer, and the lane then has that many (QpConnector
  // pairs QP j with the peer's QP j of the same NIC).
  o.qp.qps_per_nic = static_cast<uint32_t>(c.flow.qps_per_lane);
  static_assert(config::kMaxQpsPerLane == peer::kMaxQpsPerNic);
  o.qp.timeout = static_cast<uint8_t>(c.peer.qp_timeout);
  o.qp.retry_cnt = static_cast<uint8_t>(c.peer.qp_retry_cnt);
  const auto& f = c.flow;
  o.balancer.policy = balancer::parse_policy(f.policy).value_or(balancer::Policy::kWeighted);
  o.balancer.chunk_bytes = static_cast<uint32_t>(f.chunk_bytes);
  o.balancer.min_lane_fraction = f.min_lane_fraction;
  o.balancer.honour_pci_distance = f.honour_pci_distance;
  o.balancer.cnp_half_weight_per_s = f.cnp_half_weight_per_s;
  o.balancer.rejoin_backoff_min_us = static_cast<uint64_t>(f.rejoin_backoff_min_ms) * 1000;
  o.balancer.rejoin_backoff_max_us = static_cast<uint64_t>(f.rejoin_backoff_max_ms) * 1000;
  o.lane_window_chunks = static_cast<uint32_t>(f.lane_window_chunks);
  o.sq_depth = static_cast<uint32_t>(f.sq_depth);
  o.cq_depth = static_cast<uint32_t>(f.cq_depth);
  o.max_flows_per_client = static_cast<uint32_t>(f.max_flows_per_client);
  o.max_grants_per_peer = static_cast<uint32_t>(f.max_grants_per_peer);
  o.max_receives_per_peer = static_cast<uint32_t>(f.max_receives_per_peer);
  // rdma_core holds registrations over 3.5 GiB as several MRs: peers get every slice's rkey.
  o.slice_reader = [](const verbs::MemoryRegion& mr) -> std::optional<flow::MrSlices> {
    auto slices = mr.remote_slices();
    if (!slices) return std::nullopt;
    return flow::MrSlices{slices->slice_bytes, std::move(slices->rkeys)};
  };
  return o;
}

}  // namespace

std::string peer_start_problem(const config::Config& c) {
  if (!c.peer.enabled) return {};
  const std::string node = node_id_of(c);
  for (const auto& p : c.peers)
    if (p.node_id == node)
      return fmt::format("[[peers]] lists this node ({}, the host name): set [peer] node_id", node);
  return {};
}

bool Daemon::start_flows() {
  if (!config_.peer.enabled) return true;
  if (const std::string problem = peer_start_problem(config_); !problem.empty()) {
    log::get(log::Component::kFlow)->error("cannot start flows error={}", base::q(problem));
    return false;
  }
  auto options = flow_options(config_);
  const std::string node = options.peer.node_id;
  flows_ = std::make_unique<flow::FlowService>(io_, std::move(options), nics_->flow_nics(), ipc_->registrations(),
                                               exporter_->registry());
  if (const base::Status st = flows_->start(); !st.ok()) {
    log::get(log::Component::kFlow)->error("cannot start flows error={}", base::q(st.message()));
    flows_.reset();
    return false;
  }
  flows_->set_fd_budget(&ipc_->fd_budget());
  ipc_->set_flow_handler(flows_.get());
  exporter_->add_collectable(flows_->collector());
  if (device_events_) {
    device_events_->set_port_sink([this](size_t nic, bool up) { flows_->port_changed(nic, up); });
    device_events_->set_qp_sink([this](size_t nic, uint32_t qpn) { flows_->qp_failed(nic, qpn); });
    device_events_->set_gid_sink([this](size_t nic) { flows_->gid_changed(nic); });
  }
  log::get(log::Component::kFlow)->info("flows started node_id={} listen={}:{} security={} peers={} discover={} nics={} policy={}",
                         node, config_.peer.listen_host, flows_->peer_port(), config_.peer.security(),
                         config_.peers.size(), base::q(config_.peer.discover), config_.nics.size(), config_.flow.policy);
  return true;
}

}  // namespace rdmad::daemon
