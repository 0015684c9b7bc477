#pragma once
// One TCP connection to a peer daemon: TLS 1.3 (unless the channel is insecure), framing, the
// handshake state machine (TLS, hello, ready) and keepalive. Owned by shared_ptr so Asio handlers
// keep it alive; it reaches its channel through a pointer that is cleared when the channel lets
// go of it.
//
// The hello is checked against the credential: the id a peer claims must be one its certificate
// proves (a DNS SAN, or a URI SAN under the configured prefix) or, with a PSK, the identity it
// offered in the TLS handshake; a dialler also checks that the certificate is the dialled node's
// before it says anything. The send queue is bounded in bytes (PeerConfig::send_queue_bytes):
// above half of it the connection stops reading from the peer until the queue drains to a quarter
// (its requests wait, TCP pushes back), and a frame that does not fit closes the connection.
#include <array>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>

#include "rdmad/daemon/peer/wire.h"
#include "tls_context.h"

namespace rdmad::peer {

class PeerChannel;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  enum class Role : uint8_t { kInitiator, kAcceptor };
  using Clock = std::chrono::steady_clock;

  /// `expected_peer`: the node id an initiator dialled (acceptors learn it from the hello).
  /// `tls`: the channel's credentials now; null for an insecure channel (plain TCP).
  Connection(PeerChannel& channel, boost::asio::ip::tcp::socket socket, Role role, std::string expected_peer,
             std::shared_ptr<TlsContext> tls);

  /// Initiator: connects, then runs the handshake.
  void connect(const boost::asio::ip::tcp::endpoint& to);
  /// Runs the handshake on a connected socket.
  void start();
  /// Queues a frame; false when the connection is closed or the frame did not fit the send queue
  /// (counted; the connection closes right after, from the io_context, not inside this call).
  bool send(MessageType type, std::span<const uint8_t> payload);
  /// Closes and tells the channel (once).
  void close(const std::string& reason);
  /// Closes without telling the channel (the channel is stopping).
  void detach();

  const std::string& peer_id() const { return peer_id_; }
  const std::string& expected_peer() const { return expected_; }
  /// The remote IP address (no port): the unit of the per-source handshake limit.
  const std::string& source() const { return source_; }
  void set_source(std::string s) { source_ = std::move(s); }
  Role role() const { return role_; }
  bool established() const { return established_; }
  Clock::time_point established_at() const { return established_at_; }
  uint64_t queued_bytes() const { return queued_bytes_; }
  /// "127.0.0.1:41234": the other end of the TCP connection (empty before it is known).
  const std::string& remote() const { return remote_; }
  /// The round trip of the last keepalive ping answered (0: none answered yet).
  std::chrono::microseconds rtt() const { return rtt_; }
  /// "node-b (127.0.0.1:41234)" for log lines.
  std::string describe() const;

 private:
  template <typename Buffer, typename Handler>
  void read_exact(const Buffer& buffer, Handler&& handler);
  void on_tls_handshake(const boost::system::error_code& ec);
  void send_hello();
  void read_header();
  void read_body(uint16_t type, uint32_t length);
  void after_frame();
  void handle(MessageType type, std::span<const uint8_t> payload);
  void on_hello(std::span<const uint8_t> payload);
  void on_ready();
  void maybe_established();
  void arm_timer();
  void on_timer();
  void write_next();
  // Logs why (rate-limited), counts it (when counter is given) and closes.
  void refuse(const std::string& reason, uint64_t* counter);
  std::string tls_failure(const boost::system::error_code& ec) const;

  PeerChannel* channel_;
  boost::asio::ip::tcp::socket socket_;
  std::shared_ptr<TlsContext> tls_context_;  // kept alive while its SSL object lives
  std::optional<boost::asio::ssl::stream<boost::asio::ip::tcp::socket&>> tls_;
  TlsPeer tls_peer_;
  // The node ids the peer's credential proves; nullopt: any (insecure, or a PSK seen by its dialler).
  std::optional<std::vector<std::string>> proven_ids_;
  boost::asio::steady_timer timer_;
  Role role_;
  std::string expected_;
  std::string peer_id_;
  std::string remote_;
  std::string source_;
  bool connected_ = false;  // TCP is up
  bool hello_received_ = false;
  bool peer_verified_ = false;  // its hello checked out against its credential
  bool peer_ready_ = false;     // it checked ours
  bool established_ = false;
  bool closed_ = false;
  std::array<uint8_t, kHeaderBytes> header_{};
  std::vector<uint8_t> body_;
  std::deque<std::vector<uint8_t>> out_;
  uint64_t queued_bytes_ = 0;
  bool writing_ = false;
  bool reading_ = false;      // a read is outstanding
  bool read_paused_ = false;  // back-pressure: the peer does not drain what we send
  bool overflowed_ = false;   // the send queue overflowed; the close is on its way
  Clock::time_point started_;
  Clock::time_point last_rx_;
  Clock::time_point established_at_;
  uint64_t ping_seq_ = 0;
  Clock::time_point ping_sent_at_;  // of ping ping_seq_
  std::chrono::microseconds rtt_{0};
};

}  // namespace rdmad::peer
