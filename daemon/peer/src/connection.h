#pragma once
// One TCP connection to a peer daemon: framing, the handshake state machine (hello, optional
// mutual HMAC proof, ready) and keepalive. Owned by shared_ptr so Asio handlers keep it alive;
// it reaches its channel through a pointer that is cleared when the channel lets go of it.
#include <array>
#include <chrono>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "rdmad/peer/auth.h"
#include "rdmad/peer/wire.h"

namespace rdmad::peer {

class PeerChannel;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  enum class Role : uint8_t { kInitiator, kAcceptor };

  /// `expected_peer`: the node id an initiator dialled (acceptors learn it from the hello).
  Connection(PeerChannel& channel, boost::asio::ip::tcp::socket socket, Role role, std::string expected_peer);

  /// Initiator: connects, then runs the handshake.
  void connect(const boost::asio::ip::tcp::endpoint& to);
  /// Runs the handshake on a connected socket.
  void start();
  void send(MessageType type, std::span<const uint8_t> payload);
  /// Closes and tells the channel (once).
  void close(const std::string& reason);
  /// Closes without telling the channel (the channel is stopping).
  void detach();

  const std::string& peer_id() const { return peer_id_; }
  const std::string& expected_peer() const { return expected_; }
  Role role() const { return role_; }
  bool established() const { return established_; }
  /// "node-b (127.0.0.1:41234)" for log lines.
  std::string describe() const;

 private:
  void read_header();
  void read_body(uint16_t type, uint32_t length);
  void handle(MessageType type, std::span<const uint8_t> payload);
  void on_hello(std::span<const uint8_t> payload);
  void on_auth(std::span<const uint8_t> payload);
  void on_ready();
  void maybe_established();
  void arm_timer();
  void on_timer();
  void write_next();
  // Logs why, counts it (when counter is given) and closes.
  void refuse(const std::string& reason, uint64_t* counter);

  PeerChannel* channel_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer timer_;
  Role role_;
  std::string expected_;
  std::string peer_id_;
  std::string remote_;
  Nonce my_nonce_{};
  Nonce peer_nonce_{};
  bool connected_ = false;  // TCP is up
  bool hello_received_ = false;
  bool peer_verified_ = false;  // we checked its proof (or no key is in use)
  bool peer_ready_ = false;     // it checked ours
  bool established_ = false;
  bool closed_ = false;
  std::array<uint8_t, kHeaderBytes> header_{};
  std::vector<uint8_t> body_;
  std::deque<std::vector<uint8_t>> out_;
  bool writing_ = false;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point last_rx_;
  uint64_t ping_seq_ = 0;
};

}  // namespace rdmad::peer
