#pragma once
// Per-peer QP bring-up over the peer channel. When a peer connects, the daemon that dialled it
// offers its endpoints; the other creates its QPs, takes them to RTS against the offer and answers
// with its own; the offerer connects its QPs and acknowledges. Each side is ready only when its QPs
// are in RTS and the other's are at least in RTR, so the first WRITE finds a receiving QP.
// A lost peer destroys its QPs; a reconnection brings up fresh ones.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>

#include "rdmad/peer/peer_channel.h"
#include "rdmad/peer/qp_connector.h"

namespace rdmad::peer {

struct SessionCounters {
  uint64_t sessions_ready = 0;   // QP sets brought up
  uint64_t setup_failures = 0;   // a transition failed or the peer sent something inconsistent
};

class PeerSession {
 public:
  /// Makes the connector (local NICs, PDs, CQs) for a peer.
  using ConnectorFactory = std::function<std::unique_ptr<QpConnector>(const std::string& peer)>;

  /// Installs itself as the channel's handlers.
  PeerSession(PeerChannel& channel, ConnectorFactory factory);

  /// Called when the QPs to a peer are ready to carry traffic.
  void set_on_ready(std::function<void(const std::string& peer, QpConnector& qps)> f) { on_ready_ = std::move(f); }
  /// Called when a ready peer is lost (its QPs are destroyed right after).
  void set_on_lost(std::function<void(const std::string& peer)> f) { on_lost_ = std::move(f); }

  /// The ready QPs to a peer, or nullptr.
  QpConnector* ready(const std::string& peer) const;
  const SessionCounters& counters() const { return counters_; }

 private:
  enum class State : uint8_t { kOffered, kAnswered, kReady };
  struct Peer {
    State state = State::kOffered;
    uint32_t session = 0;
    std::unique_ptr<QpConnector> qps;
  };

  void on_up(const std::string& peer, bool initiator);
  void on_down(const std::string& peer);
  void on_message(const std::string& peer, MessageType type, std::span<const uint8_t> payload);
  void on_offer(const std::string& peer, const Endpoints& m);
  void on_answer(const std::string& peer, const Endpoints& m);
  void on_ack(const std::string& peer, const Endpoints& m);
  void fail(const std::string& peer, const std::string& why);
  void become_ready(const std::string& peer, Peer& p);
  void send(const std::string& peer, EndpointsKind kind, uint32_t session, std::vector<NicEndpoint> eps);

  PeerChannel& channel_;
  ConnectorFactory factory_;
  std::map<std::string, Peer> peers_;
  uint32_t next_session_ = 1;
  SessionCounters counters_;
  std::function<void(const std::string&, QpConnector&)> on_ready_;
  std::function<void(const std::string&)> on_lost_;
};

}  // namespace rdmad::peer
