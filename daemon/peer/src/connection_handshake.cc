// Connection: the handshake. TLS 1.3 first (unless insecure), then each side sends its hello;
// each checks the other's (magic, version, id) against what the TLS credential proves and answers
// ready; a connection is established when both hellos are checked and both readies received.
#include <openssl/x509.h>

#include <algorithm>

#include <fmt/format.h>

#include "connection.h"
#include "rdmad/daemon/peer/peer_channel.h"

namespace rdmad::peer {

namespace asio = boost::asio;

void Connection::start() {
  boost::system::error_code ec;
  const auto ep = socket_.remote_endpoint(ec);
  if (!ec) {
    remote_ = ep.address().to_string() + ":" + std::to_string(ep.port());
    source_ = ep.address().to_string();
  }
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  connected_ = true;
  started_ = last_rx_ = Clock::now();
  if (role_ == Role::kAcceptor) arm_timer();
  if (!tls_context_) {
    send_hello();
    return;
  }
  tls_.emplace(socket_, tls_context_->native());
  tls_context_->attach(tls_->native_handle(), &tls_peer_);
  const auto type = role_ == Role::kInitiator ? asio::ssl::stream_base::client : asio::ssl::stream_base::server;
  tls_->async_handshake(type, [self = shared_from_this()](const boost::system::error_code& e) {
    if (self->closed_) return;
    self->on_tls_handshake(e);
  });
}

std::string Connection::tls_failure(const boost::system::error_code& ec) const {
  if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) {
    return "the peer closed the connection during the TLS handshake (it refused our credential, or is not TLS)";
  }
  std::string why = ec.message();
  const long verify = SSL_get_verify_result(const_cast<Connection*>(this)->tls_->native_handle());
  if (verify != X509_V_OK) why += std::string(": ") + X509_verify_cert_error_string(verify);
  return why;
}

void Connection::on_tls_handshake(const boost::system::error_code& ec) {
  auto& c = channel_->counters_;
  if (ec) return refuse("refused: TLS handshake failed: " + tls_failure(ec), &c.auth_failures);
  std::string error;
  proven_ids_ = tls_context_->proven_ids(tls_->native_handle(), tls_peer_, role_ == Role::kInitiator, &error);
  if (proven_ids_ && proven_ids_->empty()) return refuse("refused: " + error, &c.auth_failures);
  // A dialler says nothing to a node that is not the one it dialled.
  // (A discovered address is dialled without an expected id: its credential says who it is.)
  if (role_ == Role::kInitiator && !expected_.empty() && proven_ids_ &&
      std::find(proven_ids_->begin(), proven_ids_->end(), expected_) == proven_ids_->end()) {
    return refuse(fmt::format("refused: dialled {} but its certificate is for {}", expected_,
                              fmt::join(*proven_ids_, ", ")),
                  &c.auth_failures);
  }
  send_hello();
}

void Connection::send_hello() {
  Hello h;
  h.node_id = channel_->config_.node_id;
  send(MessageType::kHello, encode(h));
  if (!closed_) read_header();
}

void Connection::handle(MessageType type, std::span<const uint8_t> payload) {
  auto& c = channel_->counters_;
  const bool handshake_frame = type == MessageType::kHello || type == MessageType::kReady;
  if (established_ == handshake_frame) {
    refuse("protocol error: frame type " + std::to_string(static_cast<int>(type)) +
               (established_ ? " after" : " before") + " the handshake",
           established_ ? &c.frame_errors : &c.handshake_failures);
    return;
  }
  switch (type) {
    case MessageType::kHello: on_hello(payload); return;
    case MessageType::kReady: on_ready(); return;
    case MessageType::kPing: {
      const auto p = decode_ping(payload);
      if (!p) {
        refuse("broken frame: malformed ping", &c.frame_errors);
        return;
      }
      send(MessageType::kPong, encode(*p));
      return;
    }
    case MessageType::kPong: {
      const auto p = decode_ping(payload);
      if (!p) {
        refuse("broken frame: malformed pong", &c.frame_errors);
        return;
      }
      // The answer to our latest ping measures the round trip (an older one's would be late).
      if (p->seq == ping_seq_ && ping_seq_ != 0)
        rtt_ = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - ping_sent_at_);
      return;  // any frame proves liveness (last_rx_)
    }
    default:
      if (!flow_payload_valid(type, payload)) {
        refuse(std::string("broken frame: malformed ") + to_string(type), &c.frame_errors);
        return;
      }
      channel_->on_frame(*this, type, payload);
      return;
  }
}

void Connection::on_hello(std::span<const uint8_t> payload) {
  auto& c = channel_->counters_;
  const PeerConfig& cfg = channel_->config_;
  const auto h = decode_hello(payload);
  if (!h) return refuse("refused: malformed hello", &c.handshake_failures);
  if (h->magic != kMagic) return refuse("refused: not an rdmad peer (bad magic)", &c.handshake_failures);
  if (h->version != kVersion) {
    return refuse("refused: peer speaks protocol version " + std::to_string(h->version) + ", this daemon " +
                      std::to_string(kVersion),
                  &c.handshake_failures);
  }
  if (hello_received_) return refuse("protocol error: second hello", &c.handshake_failures);
  hello_received_ = true;
  peer_id_ = h->node_id;
  if (peer_id_ == cfg.node_id) return refuse("refused: peer presents this daemon's own node id", &c.handshake_failures);
  if (role_ == Role::kInitiator && !expected_.empty() && peer_id_ != expected_) {
    return refuse("refused: dialled " + expected_ + " but it says it is " + peer_id_, &c.handshake_failures);
  }
  // The id must be one the credential proves: a certificate for node-c cannot claim node-b.
  if (proven_ids_ && std::find(proven_ids_->begin(), proven_ids_->end(), peer_id_) == proven_ids_->end()) {
    const bool psk = tls_context_ && tls_context_->security() == Security::kPsk;
    return refuse(fmt::format("refused: it claims to be {} but its {} is for {}", peer_id_,
                              psk ? "pre-shared key identity" : "certificate", fmt::join(*proven_ids_, ", ")),
                  &c.auth_failures);
  }
  peer_verified_ = true;
  send(MessageType::kReady, {});
  maybe_established();
}

void Connection::on_ready() {
  if (!hello_received_ || peer_ready_) {
    return refuse("protocol error: unexpected ready", &channel_->counters_.handshake_failures);
  }
  peer_ready_ = true;
  maybe_established();
}

void Connection::maybe_established() {
  if (closed_ || !peer_verified_ || !peer_ready_ || established_) return;
  established_ = true;
  established_at_ = last_rx_ = Clock::now();
  channel_->counters_.handshakes_completed++;
  channel_->on_established(shared_from_this());
}

}  // namespace rdmad::peer
