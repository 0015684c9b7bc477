#include "rdmad/daemon/peer/peer_session.h"

#include <random>

#include "peer_log.h"
#include "rdmad/base/log_fields.h"
#include "rdmad/base/log_limiter.h"

namespace rdmad::peer {
namespace {

// A peer whose endpoints keep failing (or a broken one) reconnects and fails again: a few lines.
base::LogLimiter g_bring_up_log;

}  // namespace

PeerSession::PeerSession(PeerChannel& channel, ConnectorFactory factory)
    : channel_(channel), factory_(std::move(factory)) {
  // Session numbers tell one session's messages from the last one's (a receive advertised in the
  // old session must not count in the new one): counting from 1 on both nodes would repeat them.
  next_session_ = std::random_device{}() | 1u;
  channel_.set_handlers({
      .on_up = [this](const std::string& p, bool initiator) { on_up(p, initiator); },
      .on_down = [this](const std::string& p, const std::string&) { on_down(p); },
      .on_message = [this](const std::string& p, MessageType t, std::span<const uint8_t> b) { on_message(p, t, b); },
  });
}

QpConnector* PeerSession::ready(const std::string& peer) const {
  auto it = peers_.find(peer);
  return it != peers_.end() && it->second.state == State::kReady ? it->second.qps.get() : nullptr;
}

void PeerSession::set_nic(uint16_t nic_index, const std::function<LocalNic(const std::string& peer)>& make) {
  for (auto& [id, p] : peers_) {
    if (p.qps) p.qps->set_nic(nic_index, make(id));
  }
}

uint32_t PeerSession::session_of(const std::string& peer) const {
  auto it = peers_.find(peer);
  return it != peers_.end() && it->second.state == State::kReady ? it->second.session : 0;
}

std::vector<std::string> PeerSession::ready_peers() const {
  std::vector<std::string> out;
  for (const auto& [id, p] : peers_) {
    if (p.state == State::kReady) out.push_back(id);
  }
  return out;
}

void PeerSession::on_up(const std::string& peer, bool initiator) {
  peers_.erase(peer);
  if (!initiator) return;  // the dialling side offers
  Peer& p = peers_[peer];
  p.qps = factory_(peer);
  if (!p.qps) return fail(peer, "no queue pairs can be made for this peer");
  auto eps = p.qps->prepare();
  if (!eps.ok()) return fail(peer, eps.status().message());
  log_left_out(peer, *p.qps);
  if (next_session_ == 0) next_session_ = 1;  // 0 is no session
  p.session = next_session_++;
  p.state = State::kOffered;
  send(peer, EndpointsKind::kOffer, p.session, std::move(eps.value()));
}

void PeerSession::on_down(const std::string& peer) {
  if (auto it = peers_.find(peer); it != peers_.end()) {
    const bool was_ready = it->second.state == State::kReady;
    if (was_ready && on_lost_) on_lost_(peer);
    peers_.erase(it);  // QPs destroyed
  }
  if (on_closed_) on_closed_(peer);
}

void PeerSession::on_message(const std::string& peer, MessageType type, std::span<const uint8_t> payload) {
  if (type != MessageType::kEndpoints) {
    if (on_message_) on_message_(peer, type, payload);
    return;
  }
  const auto m = decode_endpoints(payload);
  if (!m) return fail(peer, "malformed endpoints message");
  if (is_rebuild(m->kind)) return on_rebuild(peer, *m);
  switch (m->kind) {
    case EndpointsKind::kOffer: return on_offer(peer, *m);
    case EndpointsKind::kAnswer: return on_answer(peer, *m);
    case EndpointsKind::kAck: return on_ack(peer, *m);
    default: return;
  }
}

void PeerSession::on_offer(const std::string& peer, const Endpoints& m) {
  Peer& p = peers_[peer];
  p = Peer{};
  p.qps = factory_(peer);
  if (!p.qps) return fail(peer, "no queue pairs can be made for this peer");
  p.session = m.session;
  auto eps = p.qps->prepare();
  if (!eps.ok()) return fail(peer, eps.status().message());
  log_left_out(peer, *p.qps);
  const verbs::Status st = p.qps->connect(m.endpoints);
  if (!st.ok()) return fail(peer, st.message());
  // Answer only with the QPs that found a partner.
  std::vector<NicEndpoint> mine;
  for (const QpConnector::Qp& q : p.qps->qps()) mine.push_back(q.local);
  p.state = State::kAnswered;
  send(peer, EndpointsKind::kAnswer, m.session, std::move(mine));
}

void PeerSession::on_answer(const std::string& peer, const Endpoints& m) {
  auto it = peers_.find(peer);
  if (it == peers_.end() || it->second.state != State::kOffered || it->second.session != m.session) {
    return fail(peer, "answer to no outstanding offer");
  }
  const verbs::Status st = it->second.qps->connect(m.endpoints);
  if (!st.ok()) return fail(peer, st.message());
  send(peer, EndpointsKind::kAck, m.session, {});
  become_ready(peer, it->second);
}

void PeerSession::on_ack(const std::string& peer, const Endpoints& m) {
  auto it = peers_.find(peer);
  if (it == peers_.end() || it->second.state != State::kAnswered || it->second.session != m.session) {
    return fail(peer, "acknowledgement of no outstanding answer");
  }
  become_ready(peer, it->second);
}

void PeerSession::become_ready(const std::string& peer, Peer& p) {
  p.state = State::kReady;
  counters_.sessions_ready++;
  peer_logger()->info("qps up peer={} qps={}", peer, p.qps->qps().size());
  if (on_ready_) on_ready_(peer, *p.qps);
}

void PeerSession::log_left_out(const std::string& peer, const QpConnector& qps) {
  for (const std::string& why : qps.left_out())
    base::log_limited(*peer_logger(), g_bring_up_log, spdlog::level::info,
                      "qp bring-up waits peer={} reason={} until=port_active", peer, base::q(why));
}

void PeerSession::fail(const std::string& peer, const std::string& why) {
  counters_.setup_failures++;
  base::log_limited(*peer_logger(), g_bring_up_log, spdlog::level::err, "qp bring-up failed peer={} error={}", peer, base::q(why));
  peers_.erase(peer);
  // Start over on a fresh connection (redialled with back-off by the dialling side).
  channel_.disconnect(peer, "QP bring-up failed");
}

void PeerSession::send(const std::string& peer, EndpointsKind kind, uint32_t session, std::vector<NicEndpoint> eps) {
  Endpoints m;
  m.kind = kind;
  m.session = session;
  m.endpoints = std::move(eps);
  channel_.send(peer, MessageType::kEndpoints, encode(m));
}

}  // namespace rdmad::peer
