#pragma once
// The peer control channel: TCP between daemons on the control plane's io_context (no thread per
// connection). It accepts peers on the configured address and dials the configured ones,
// authenticates both directions when a key is configured, keeps each connection alive with
// ping/pong, and redials lost or unreachable peers with exponential back-off and jitter.
// All calls from the io_context's thread.
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

#include "rdmad/peer/backoff.h"
#include "rdmad/peer/peer_config.h"
#include "rdmad/peer/wire.h"

namespace spdlog {
class logger;
}

namespace rdmad::peer {

class Connection;

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

  PeerChannel(boost::asio::io_context& io, PeerConfig config);
  ~PeerChannel();
  PeerChannel(const PeerChannel&) = delete;
  PeerChannel& operator=(const PeerChannel&) = delete;

  void set_handlers(Handlers h) { handlers_ = std::move(h); }

  /// Loads the key, binds the listening socket and starts dialling the configured peers. A
  /// start-up error (unreadable key, address in use) returns false with `error` naming the cause.
  bool start(std::string& error);
  /// Closes every connection and stops listening and dialling.
  void stop();

  /// Queues a frame to an established peer; false when it is not connected.
  bool send(const std::string& peer, MessageType type, std::span<const uint8_t> payload);
  /// Closes the connection to a peer (it is redialled if configured).
  void disconnect(const std::string& peer, const std::string& reason);
  bool connected(const std::string& peer) const { return established_.count(peer) != 0; }
  /// The port bound (useful with listen_port 0).
  uint16_t listen_port() const { return listen_port_; }
  const PeerCounters& counters() const { return counters_; }
  const PeerConfig& config() const { return config_; }

 private:
  friend class Connection;
  struct Dialer {
    PeerAddress address;
    std::unique_ptr<boost::asio::steady_timer> timer;
    std::unique_ptr<Backoff> backoff;
    std::shared_ptr<Connection> connection;  // dialling, handshaking or established
    bool failed_before = false;
  };

  void accept();
  void dial(Dialer& d);
  void schedule_redial(Dialer& d);
  // Connection callbacks.
  void on_established(const std::shared_ptr<Connection>& c);
  void on_closed(const std::shared_ptr<Connection>& c, const std::string& reason, bool was_established);
  void on_frame(Connection& c, MessageType type, std::span<const uint8_t> payload);

  boost::asio::io_context& io_;
  PeerConfig config_;
  std::shared_ptr<spdlog::logger> log_;
  std::vector<uint8_t> key_;  // empty: no authentication
  boost::asio::ip::tcp::acceptor acceptor_;
  uint16_t listen_port_ = 0;
  bool running_ = false;
  std::vector<std::unique_ptr<Dialer>> dialers_;
  std::vector<std::shared_ptr<Connection>> accepted_;  // until established or closed
  std::map<std::string, std::shared_ptr<Connection>> established_;
  PeerCounters counters_;
  Handlers handlers_;
  // Handlers hold a weak reference: expired once the channel is destroyed.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace rdmad::peer
