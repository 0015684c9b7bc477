// Rebuild of one NIC's QPs on a ready session (failover recovery). The exchange mirrors the
// session's bring-up (offer, answer, ack) but touches only that NIC's QPs; a failure or an
// inconsistent message abandons the rebuild and leaves the session up.
#include <algorithm>

#include "peer_log.h"
#include "rdmad/base/log_fields.h"
#include "rdmad/daemon/peer/peer_session.h"

namespace rdmad::peer {

namespace {

// Non-empty and every endpoint of that NIC.
bool all_of_nic(const std::vector<NicEndpoint>& eps, uint16_t nic) {
  return !eps.empty() &&
         std::all_of(eps.begin(), eps.end(), [&](const NicEndpoint& e) { return e.nic_index == nic; });
}

std::vector<NicEndpoint> local_endpoints(const QpConnector& qps, uint16_t nic) {
  std::vector<NicEndpoint> out;
  for (const QpConnector::Qp& q : qps.qps()) {
    if (q.nic_index == nic && q.connected) out.push_back(q.local);
  }
  return out;
}

}  // namespace

bool PeerSession::rebuild(const std::string& peer, uint16_t nic_index, RebuildCause cause) {
  auto it = peers_.find(peer);
  if (it == peers_.end() || it->second.state != State::kReady) return false;
  Peer& p = it->second;
  if (nic_index >= p.qps->nics().size() || p.rebuilds.count(nic_index) != 0) return false;
  replacing(peer, nic_index, cause);
  auto eps = p.qps->prepare_nic(nic_index);
  if (!eps.ok()) {
    counters_.rebuild_failures++;
    peer_logger()->error("qp rebuild failed peer={} nic={} error={}", peer, nic_index, base::q(eps.status().message()));
    return false;
  }
  p.rebuilds[nic_index] = Rebuild{.offered = true, .cause = cause, .remote = {}};
  peer_logger()->info("qp rebuild started peer={} nic={}", peer, nic_index);
  send_rebuild(peer, EndpointsKind::kRebuildOffer, p.session, nic_index, cause, std::move(eps.value()));
  return true;
}

void PeerSession::on_rebuild(const std::string& peer, const Endpoints& m) {
  auto it = peers_.find(peer);
  if (it == peers_.end() || it->second.state != State::kReady || it->second.session != m.session) {
    counters_.rebuild_stale++;
    log_peer_message(spdlog::level::warn, "qp rebuild message ignored peer={} session={} reason=not_the_ready_session",
                     peer, m.session);
    return;
  }
  Peer& p = it->second;
  switch (m.kind) {
    case EndpointsKind::kRebuildOffer:
      return on_rebuild_offer(peer, p, m);
    case EndpointsKind::kRebuildAnswer:
      return on_rebuild_answer(peer, p, m);
    default:
      return on_rebuild_ack(peer, p, m);
  }
}

void PeerSession::on_rebuild_offer(const std::string& peer, Peer& p, const Endpoints& m) {
  const uint16_t nic = m.nic_index;
  auto r = p.rebuilds.find(nic);
  if (r != p.rebuilds.end() && r->second.offered && channel_.config().node_id < peer) {
    // Both sides offered this NIC at once: the smaller node id's offer wins, this one is dropped.
    peer_logger()->info("qp rebuild crossed peer={} nic={} kept=own_offer", peer, nic);
    return;
  }
  if (nic >= p.qps->nics().size() || !all_of_nic(m.endpoints, nic)) {
    rebuild_failed(peer, p, nic, "inconsistent rebuild offer");
    return send_rebuild(peer, EndpointsKind::kRebuildAnswer, p.session, nic, m.cause, {});
  }
  replacing(peer, nic, m.cause);
  auto eps = p.qps->prepare_nic(nic);
  verbs::Status st = eps.ok() ? p.qps->connect_nic(nic, m.endpoints) : eps.status();
  if (!st.ok()) {
    rebuild_failed(peer, p, nic, st.message());
    return send_rebuild(peer, EndpointsKind::kRebuildAnswer, p.session, nic, m.cause, {});
  }
  p.rebuilds[nic] = Rebuild{.offered = false, .cause = m.cause, .remote = m.endpoints};
  send_rebuild(peer, EndpointsKind::kRebuildAnswer, p.session, nic, m.cause, local_endpoints(*p.qps, nic));
}

void PeerSession::on_rebuild_answer(const std::string& peer, Peer& p, const Endpoints& m) {
  const uint16_t nic = m.nic_index;
  auto r = p.rebuilds.find(nic);
  if (r == p.rebuilds.end() || !r->second.offered) {
    counters_.rebuild_failures++;
    log_peer_message(spdlog::level::err, "qp rebuild message ignored peer={} nic={} reason=answer_without_offer", peer, nic);
    return;
  }
  if (m.endpoints.empty()) return rebuild_failed(peer, p, nic, "the peer could not rebuild its QPs");
  if (!all_of_nic(m.endpoints, nic)) {
    rebuild_failed(peer, p, nic, "inconsistent rebuild answer");
    return send_rebuild(peer, EndpointsKind::kRebuildAck, p.session, nic, m.cause, {});
  }
  const verbs::Status st = p.qps->connect_nic(nic, m.endpoints);
  if (!st.ok()) {
    rebuild_failed(peer, p, nic, st.message());
    return send_rebuild(peer, EndpointsKind::kRebuildAck, p.session, nic, m.cause, {});
  }
  send_rebuild(peer, EndpointsKind::kRebuildAck, p.session, nic, m.cause, local_endpoints(*p.qps, nic));
  rebuilt(peer, p, nic);
}

void PeerSession::on_rebuild_ack(const std::string& peer, Peer& p, const Endpoints& m) {
  const uint16_t nic = m.nic_index;
  auto r = p.rebuilds.find(nic);
  if (r == p.rebuilds.end() || r->second.offered) {
    counters_.rebuild_failures++;
    log_peer_message(spdlog::level::err, "qp rebuild message ignored peer={} nic={} reason=ack_without_answer",
                     peer, nic);
    return;
  }
  if (m.endpoints.empty()) return rebuild_failed(peer, p, nic, "the peer could not connect its QPs");
  // The ack names the offerer's QPs that found a partner: each must be one this side connected to.
  const auto& offered = r->second.remote;
  for (const NicEndpoint& e : m.endpoints) {
    if (std::find(offered.begin(), offered.end(), e) == offered.end()) {
      return rebuild_failed(peer, p, nic, "rebuild acknowledgement names QPs that were not offered");
    }
  }
  rebuilt(peer, p, nic);
}

void PeerSession::rebuild_failed(const std::string& peer, Peer& p, uint16_t nic, const std::string& why) {
  counters_.rebuild_failures++;
  p.rebuilds.erase(nic);
  log_peer_message(spdlog::level::err, "qp rebuild failed peer={} nic={} error={}", peer, nic, base::q(why));
}

void PeerSession::rebuilt(const std::string& peer, Peer& p, uint16_t nic) {
  if (auto r = p.rebuilds.find(nic); r != p.rebuilds.end() && r->second.cause == RebuildCause::kRequestRefused)
    counters_.rebuilds_request_refused++;
  p.rebuilds.erase(nic);
  counters_.rebuilds++;
  peer_logger()->info("qp rebuild done peer={} nic={}", peer, nic);
  if (on_nic_rebuilt_) on_nic_rebuilt_(peer, nic, *p.qps);
}

void PeerSession::replacing(const std::string& peer, uint16_t nic, RebuildCause cause) {
  if (on_nic_replacing_) on_nic_replacing_(peer, nic, cause);
}

void PeerSession::send_rebuild(const std::string& peer, EndpointsKind kind, uint32_t session, uint16_t nic,
                               RebuildCause cause, std::vector<NicEndpoint> eps) {
  Endpoints m;
  m.kind = kind;
  m.session = session;
  m.nic_index = nic;
  m.cause = cause;
  m.endpoints = std::move(eps);
  channel_.send(peer, MessageType::kEndpoints, encode(m));
}

}  // namespace rdmad::peer
