#pragma once
// The peer control channel: TLS 1.3 over TCP between daemons on the control plane's io_context
// (no thread per connection). It accepts peers on the configured address and dials the configured
// ones, authenticates both directions with certificates or a pre-shared key (or, with insecure,
// not at all), binds each peer's node id to its credential, keeps each connection alive with
// ping/pong, and redials lost or unreachable peers with exponential back-off and jitter.
//
// What strangers can make it spend is bounded: connections still in their handshake (in all and
// per source address; beyond, closed at accept), the handshake's duration, the bytes queued to a
// peer, and the log lines they cause (rdmad::base::log_limited). An accept that fails for want of
// descriptors pauses accepting with a growing delay instead of spinning. An established peer is
// never displaced by a later connection claiming its id (only a simultaneous cross-dial is
// resolved, by node id order). All calls from the io_context's thread.
//
// With [peer] discover, the addresses a DNS name resolves to (re-resolved on an interval, on a
// resolver thread) are candidates, not identities: each learns its node id only from a connection
// that authenticated (the hello, checked against the certificate or PSK identity). Nothing is
// dialled until a node is wanted (want(), a flow to it): then the addresses known to be that node,
// or, while none is, every address not identified yet (at most kMaxDiscoveryDials at once) are
// dialled; a connection to a node nobody wants is closed as soon as it has told who it is. This
// node's own addresses are skipped (the listen address, and any address that answers with this
// node's id).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "rdmad/base/log_limiter.h"
#include "rdmad/base/status.h"
#include "rdmad/daemon/peer/backoff.h"
#include "rdmad/daemon/peer/discovery.h"
#include "rdmad/daemon/peer/peer_config.h"
#include "rdmad/daemon/peer/wire.h"

namespace spdlog {
class logger;
}

namespace rdmad::peer {

class Connection;
class TlsContext;
class Resolver;
struct Resolution;

class PeerChannel {
 public:
  struct Handlers {
    /// A peer finished the handshake. `initiator`: this daemon dialled it.
    std::function<void(const std::string& peer, bool initiator)> on_up;
    /// An established peer was lost (closed, dead, protocol error).
    std::function<void(const std::string& peer, const std::string& reason)> on_down;
    /// A frame other than the handshake and keepalive frames from an established peer.
    std::function<void(const std::string& peer, MessageType type, std::span<const uint8_t> payload)> on_message;
  };

  /// What an operator sees of one peer (rdmactl peers).
  struct PeerStatus {
    enum class State : uint8_t { kDown, kConnecting, kConnected };
    enum class Source : uint8_t { kAccepted, kStatic, kDns };
    std::string node_id;  // empty: a discovered address no connection has identified yet
    std::string address;  // "host:port" it is dialled at, or the remote end of its last connection
    State state = State::kDown;
    Source source = Source::kAccepted;  // [[peers]], discovered, or only ever dialled this node
    bool dialled = false;    // a configured peer this channel dials
    std::string last_error;  // why its last connection closed or its last dial failed
    std::chrono::system_clock::time_point since;  // last up or down; the channel's start if never up
    std::chrono::microseconds rtt{0};             // last keepalive round trip; 0: none measured
  };

  PeerChannel(boost::asio::io_context& io, PeerConfig config);
  ~PeerChannel();
  PeerChannel(const PeerChannel&) = delete;
  PeerChannel& operator=(const PeerChannel&) = delete;

  void set_handlers(Handlers h) { handlers_ = std::move(h); }

  /// Loads the credentials, binds the listening socket and starts dialling the configured peers.
  /// A start-up error (no or bad credentials, address in use) names the cause.
  base::Status start();
  /// Closes every connection and stops listening and dialling.
  void stop();

  /// Queues a frame to an established peer; false when it is not connected.
  bool send(const std::string& peer, MessageType type, std::span<const uint8_t> payload);
  /// Closes the connection to a peer (it is redialled if configured).
  void disconnect(const std::string& peer, const std::string& reason);
  bool connected(const std::string& peer) const { return established_.count(peer) != 0; }
  /// Bytes queued to an established peer and not yet written (0 when not connected); above half
  /// of send_queue_bytes a producer should hold back.
  uint64_t queued_bytes(const std::string& peer) const;
  /// "certificates", "psk" or "insecure" (known after start()).
  const char* security() const;
  /// Connections accepted and still in their handshake.
  size_t handshaking() const { return accepted_.size(); }
  /// The port bound (useful with listen_port 0).
  uint16_t listen_port() const { return listen_port_; }
  const PeerCounters& counters() const { return counters_; }
  const PeerConfig& config() const { return config_; }
  /// Every peer this channel dials or had an established connection with, in node id order, then
  /// the discovered addresses not identified yet.
  std::vector<PeerStatus> peers() const;

  // Discovery.
  static constexpr size_t kMaxDiscoveryDials = 16;  // discovered addresses dialled at once
  /// True with [peer] discover set.
  bool discovering() const { return !config_.discover.empty(); }
  /// A [[peers]] entry names it (dialled eagerly, never closed as idle).
  bool static_peer(const std::string& node) const { return dialer_of(node) != nullptr; }
  /// Some flow needs `node` until `until`: dial the discovered addresses it may be at (see above).
  void want(const std::string& node, std::chrono::steady_clock::time_point until);
  /// True when `node` is surely not among the discovered addresses now: at least one resolution
  /// succeeded, and every address is identified (as another node, or as this one) with no dial
  /// in progress.
  bool known_absent(const std::string& node) const;
  /// What discovery knows of `node`, for an error message ("not among the 3 addresses of
  /// dns:NAME (identified: a, b; unreachable: 10.0.0.9:18515: connect failed: ...)").
  std::string discovery_state(const std::string& node) const;
  /// The established peers, in node id order.
  std::vector<std::string> established_peers() const;
  /// Sends an idle request to an established peer (FlowService's idle sessions); when the
  /// connection then closes, it is reported as closed for idleness.
  void send_idle(const std::string& peer);
  /// Closes an established peer's connection because an idle request from it was granted.
  void close_idle(const std::string& peer);

 private:
  friend class Connection;
  struct Dialer {
    PeerAddress address;
    std::unique_ptr<boost::asio::steady_timer> timer;
    std::unique_ptr<Backoff> backoff;
    std::shared_ptr<Connection> connection;  // dialling, handshaking or established
    bool failed_before = false;
  };

  // What peers() reports beyond the live state; kept for configured peers and for peers that were
  // established (authenticated), at most kMaxHistory of the latter.
  struct History {
    std::string address;
    std::string last_error;
    std::chrono::system_clock::time_point since;
    bool up = false;
  };
  static constexpr size_t kMaxHistory = 1024;
  // A discovered address (discovery.cc: pure parts; peer_discovery.cc: this side).
  struct Found {
    DiscoveredAddress address;
    std::string node_id;  // "" until a connection authenticated one
    bool self = false;    // this node's own address
    std::shared_ptr<Connection> connection;  // a dial in progress, or the session it became
    std::string last_error;
    bool failed = false;  // its last dial failed
    std::chrono::system_clock::time_point since;
    std::chrono::steady_clock::time_point next_dial{};
    std::unique_ptr<Backoff> backoff;
  };
  void resolve();
  void on_resolved(Resolution r);
  void apply_addresses(const std::vector<DiscoveredAddress>& addresses);
  void pump();
  void dial_found(Found& f);
  Found* found_of(const Connection& c);
  bool is_own_address(const DiscoveredAddress& a) const;
  bool wanted(const std::string& node) const;
  // On a discovered connection's handshake; false when it was closed (identified only).
  bool identify(const std::shared_ptr<Connection>& c);
  void found_closed(const std::shared_ptr<Connection>& c, const std::string& reason, bool was_established);
  void update_discovery_gauges();

  void note_up(const Connection& c);
  void note_closed(const std::string& peer, const std::string& reason, bool was_up);
  const Dialer* dialer_of(const std::string& peer) const;

  void accept();
  void on_accept_error(const boost::system::error_code& ec);
  void admit(boost::asio::ip::tcp::socket socket);
  void check_credentials();
  void forget_accepted(const std::shared_ptr<Connection>& c);
  void dial(Dialer& d);
  void schedule_redial(Dialer& d);
  // Connection callbacks.
  void on_established(const std::shared_ptr<Connection>& c);
  void on_closed(const std::shared_ptr<Connection>& c, const std::string& reason, bool was_established);
  void on_frame(Connection& c, MessageType type, std::span<const uint8_t> payload);

  boost::asio::io_context& io_;
  PeerConfig config_;
  std::shared_ptr<spdlog::logger> log_;
  std::shared_ptr<TlsContext> tls_;  // null: insecure
  // Log lines strangers, accept failures and established peers cause, each bounded on its own so
  // that a flood of one kind does not hide the others.
  base::LogLimiter stranger_log_;
  base::LogLimiter accept_log_;
  base::LogLimiter peer_log_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer accept_pause_;
  std::chrono::milliseconds accept_delay_{0};  // grows while accept keeps failing
  boost::asio::steady_timer credentials_timer_;
  uint16_t listen_port_ = 0;
  bool running_ = false;
  std::vector<std::unique_ptr<Dialer>> dialers_;
  std::vector<std::shared_ptr<Connection>> accepted_;  // until established or closed
  std::map<std::string, uint32_t> accepted_per_source_;  // of those, per source address
  std::map<std::string, std::shared_ptr<Connection>> established_;
  std::map<std::string, History> history_;
  std::chrono::system_clock::time_point started_at_;
  PeerCounters counters_;
  Handlers handlers_;
  // Discovery.
  std::unique_ptr<Resolver> resolver_;
  DiscoverTarget target_;
  boost::asio::steady_timer resolve_timer_;
  boost::asio::steady_timer pump_timer_;
  std::unique_ptr<Backoff> resolve_backoff_;
  bool resolved_once_ = false;
  bool resolving_ = false;
  std::map<std::string, Found> found_;  // by address key
  std::map<std::string, std::chrono::steady_clock::time_point> wanted_;
  std::map<std::string, const Connection*> idle_asked_;
  base::LogLimiter discovery_log_;
  // Handlers hold a weak reference: expired once the channel is destroyed.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace rdmad::peer
