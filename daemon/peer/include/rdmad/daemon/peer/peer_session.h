#pragma once
// Per-peer QP bring-up over the peer channel. When a peer connects, the daemon that dialled it
// offers its endpoints; the other creates its QPs, takes them to RTS against the offer and answers
// with its own; the offerer connects its QPs and acknowledges. Each side is ready only when its QPs
// are in RTS and the other's are at least in RTR, so the first WRITE finds a receiving QP.
// A lost peer destroys its QPs; a reconnection brings up fresh ones.
//
// After a NIC path failed, rebuild() replaces that NIC's QPs on both sides while the session
// and the other NICs' QPs stay up: the offerer prepares fresh QPs and sends a rebuild offer; the
// other side replaces its QPs of that NIC, connects them and answers; the offerer connects and
// acknowledges. If both sides offer the same NIC at once, the offer of the smaller node id wins.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rdmad/daemon/peer/peer_channel.h"
#include "rdmad/daemon/peer/qp_connector.h"

namespace rdmad::peer {

struct SessionCounters {
  uint64_t sessions_ready = 0;   // QP sets brought up
  uint64_t setup_failures = 0;   // a transition failed or the peer sent something inconsistent
  uint64_t rebuilds = 0;          // NIC QP sets rebuilt (on_nic_rebuilt called)
  uint64_t rebuilds_request_refused = 0;  // of those, after a request the peer refused
  uint64_t rebuild_failures = 0;  // a rebuild failed here or at the peer, or a message did not fit
  uint64_t rebuild_stale = 0;     // rebuild messages ignored: another session, or none ready
};

class PeerSession {
 public:
  /// Makes the connector (local NICs, PDs, CQs) for a peer; nullptr when it cannot (the bring-up
  /// then fails and the connection is closed).
  using ConnectorFactory = std::function<std::unique_ptr<QpConnector>(const std::string& peer)>;

  /// Installs itself as the channel's handlers.
  PeerSession(PeerChannel& channel, ConnectorFactory factory);

  /// Called when the QPs to a peer are ready to carry traffic.
  void set_on_ready(std::function<void(const std::string& peer, QpConnector& qps)> f) { on_ready_ = std::move(f); }
  /// Called when a ready peer is lost (its QPs are destroyed right after).
  void set_on_lost(std::function<void(const std::string& peer)> f) { on_lost_ = std::move(f); }
  /// Called whenever an established connection to a peer is gone, ready or not, after its QPs
  /// were destroyed (so what they used — protection domains, MRs — may go too).
  void set_on_closed(std::function<void(const std::string& peer)> f) { on_closed_ = std::move(f); }

  /// Called synchronously right before the QPs of `nic` to `peer` are destroyed by a rebuild
  /// (on both sides), so that the owner stops using them; `cause` is the one the offerer gave.
  void set_on_nic_replacing(std::function<void(const std::string& peer, uint16_t nic, RebuildCause cause)> f) {
    on_nic_replacing_ = std::move(f);
  }
  /// Called once the fresh QPs of `nic` are in RTS and the peer's at least in RTR (offerer: after
  /// connecting them; the other side: on the acknowledgement).
  void set_on_nic_rebuilt(std::function<void(const std::string& peer, uint16_t nic, QpConnector& qps)> f) {
    on_nic_rebuilt_ = std::move(f);
  }
  /// Frames other than endpoints (the flow frames, already validated by the connection) from
  /// established peers, whether or not their QPs are ready.
  void set_on_message(std::function<void(const std::string& peer, MessageType type, std::span<const uint8_t> payload)> f) {
    on_message_ = std::move(f);
  }

  /// Starts rebuilding the QPs of one NIC to a ready peer (calls on_nic_replacing, then replaces
  /// them with fresh ones and sends the offer, which tells the peer `cause`). False when the peer
  /// is not ready, the NIC does not exist, a rebuild of that NIC is already running, or the fresh
  /// QPs cannot be created (counted in rebuild_failures).
  bool rebuild(const std::string& peer, uint16_t nic_index, RebuildCause cause = RebuildCause::kPathFault);

  /// A NIC came into service after sessions started: every peer's connector gets its objects from
  /// `make(peer)` (its QPs of that NIC, if any, go; a rebuild makes fresh ones).
  void set_nic(uint16_t nic_index, const std::function<LocalNic(const std::string& peer)>& make);

  /// The ready QPs to a peer, or nullptr. While a NIC is being rebuilt its QPs in qps() are
  /// not `connected` (and qp() returns nullptr for them); after a failed rebuild they stay so
  /// until the next rebuild of that NIC.
  QpConnector* ready(const std::string& peer) const;
  /// The number both sides know a peer's current session by (from its endpoints offer); 0 when
  /// none is ready. Offerers start numbering at a random value, so a session rarely shares its
  /// number with the one before it.
  uint32_t session_of(const std::string& peer) const;
  /// The peers whose QPs are ready, in node id order.
  std::vector<std::string> ready_peers() const;
  const SessionCounters& counters() const { return counters_; }

 private:
  enum class State : uint8_t { kOffered, kAnswered, kReady };
  // A NIC rebuild in progress: this side offered it, or answered and waits for the ack.
  struct Rebuild {
    bool offered = false;
    RebuildCause cause = RebuildCause::kPathFault;
    std::vector<NicEndpoint> remote;  // answerer: the offer it connected against
  };
  struct Peer {
    State state = State::kOffered;
    uint32_t session = 0;
    std::unique_ptr<QpConnector> qps;
    std::map<uint16_t, Rebuild> rebuilds;
  };

  void on_up(const std::string& peer, bool initiator);
  void on_down(const std::string& peer);
  void on_message(const std::string& peer, MessageType type, std::span<const uint8_t> payload);
  void on_offer(const std::string& peer, const Endpoints& m);
  void on_answer(const std::string& peer, const Endpoints& m);
  void on_ack(const std::string& peer, const Endpoints& m);
  void fail(const std::string& peer, const std::string& why);
  void log_left_out(const std::string& peer, const QpConnector& qps);
  // Rebuild messages (peer_rebuild.cc).
  void on_rebuild(const std::string& peer, const Endpoints& m);
  void on_rebuild_offer(const std::string& peer, Peer& p, const Endpoints& m);
  void on_rebuild_answer(const std::string& peer, Peer& p, const Endpoints& m);
  void on_rebuild_ack(const std::string& peer, Peer& p, const Endpoints& m);
  void rebuild_failed(const std::string& peer, Peer& p, uint16_t nic, const std::string& why);
  void rebuilt(const std::string& peer, Peer& p, uint16_t nic);
  void replacing(const std::string& peer, uint16_t nic, RebuildCause cause);
  void send_rebuild(const std::string& peer, EndpointsKind kind, uint32_t session, uint16_t nic, RebuildCause cause,
                    std::vector<NicEndpoint> eps);
  void become_ready(const std::string& peer, Peer& p);
  void send(const std::string& peer, EndpointsKind kind, uint32_t session, std::vector<NicEndpoint> eps);

  PeerChannel& channel_;
  ConnectorFactory factory_;
  std::map<std::string, Peer> peers_;
  uint32_t next_session_;  // random start (constructor)
  SessionCounters counters_;
  std::function<void(const std::string&, QpConnector&)> on_ready_;
  std::function<void(const std::string&)> on_lost_;
  std::function<void(const std::string&)> on_closed_;
  std::function<void(const std::string&, uint16_t, RebuildCause)> on_nic_replacing_;
  std::function<void(const std::string&, uint16_t, QpConnector&)> on_nic_rebuilt_;
  std::function<void(const std::string&, MessageType, std::span<const uint8_t>)> on_message_;
};

}  // namespace rdmad::peer
