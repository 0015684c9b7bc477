#include "connection.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <spdlog/spdlog.h>

#include "rdmad/peer/peer_channel.h"

namespace rdmad::peer {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

Connection::Connection(PeerChannel& channel, asio::ip::tcp::socket socket, Role role, std::string expected_peer)
    : channel_(&channel),
      socket_(std::move(socket)),
      timer_(socket_.get_executor()),
      role_(role),
      expected_(std::move(expected_peer)),
      my_nonce_(random_nonce()) {}

std::string Connection::describe() const {
  const std::string& id = peer_id_.empty() ? expected_ : peer_id_;
  if (id.empty()) return remote_;
  return id + " (" + remote_ + ")";
}

void Connection::connect(const asio::ip::tcp::endpoint& to) {
  remote_ = to.address().to_string() + ":" + std::to_string(to.port());
  started_ = Clock::now();
  arm_timer();  // the handshake timeout covers the TCP connect too
  socket_.async_connect(to, [self = shared_from_this()](const boost::system::error_code& ec) {
    if (self->closed_) return;
    if (ec) {
      self->close("connect failed: " + ec.message());
      return;
    }
    if (self->channel_ != nullptr) self->channel_->counters_.connections_dialed++;
    self->start();
  });
}

void Connection::start() {
  boost::system::error_code ec;
  const auto ep = socket_.remote_endpoint(ec);
  if (!ec) remote_ = ep.address().to_string() + ":" + std::to_string(ep.port());
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  connected_ = true;
  started_ = last_rx_ = Clock::now();
  if (role_ == Role::kAcceptor) arm_timer();
  Hello h;
  h.node_id = channel_->config_.node_id;
  h.has_key = !channel_->key_.empty();
  h.nonce = my_nonce_;
  send(MessageType::kHello, encode(h));
  read_header();
}

void Connection::send(MessageType type, std::span<const uint8_t> payload) {
  if (closed_) return;
  out_.push_back(encode_frame(type, payload));
  if (!writing_) write_next();
}

void Connection::write_next() {
  if (out_.empty() || closed_) {
    writing_ = false;
    return;
  }
  writing_ = true;
  asio::async_write(socket_, asio::buffer(out_.front()),
                    [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                      if (self->closed_) return;
                      if (ec) {
                        self->close("write failed: " + ec.message());
                        return;
                      }
                      self->out_.pop_front();
                      self->write_next();
                    });
}

void Connection::read_header() {
  asio::async_read(socket_, asio::buffer(header_), [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
    if (self->closed_) return;
    if (ec) {
      self->close(ec == asio::error::eof ? "connection closed by the peer" : "read failed: " + ec.message());
      return;
    }
    std::string error;
    const auto h = decode_header(self->header_, self->channel_->config_.max_frame_bytes, &error);
    if (!h) {
      auto& c = self->channel_->counters_;
      if (self->established_) {
        self->refuse("broken frame: " + error, &c.frame_errors);
      } else {
        self->refuse("refused: not an rdmad peer (" + error + ")", &c.handshake_failures);
      }
      return;
    }
    self->read_body(h->type, h->length);
  });
}

void Connection::read_body(uint16_t type, uint32_t length) {
  body_.resize(length);
  asio::async_read(socket_, asio::buffer(body_),
                   [self = shared_from_this(), type](const boost::system::error_code& ec, size_t) {
                     if (self->closed_) return;
                     if (ec) {
                       self->close(ec == asio::error::eof ? "connection closed by the peer"
                                                          : "read failed: " + ec.message());
                       return;
                     }
                     self->last_rx_ = Clock::now();
                     self->handle(static_cast<MessageType>(type), self->body_);
                     if (!self->closed_) self->read_header();
                   });
}

void Connection::handle(MessageType type, std::span<const uint8_t> payload) {
  auto& c = channel_->counters_;
  const bool handshake_frame = type == MessageType::kHello || type == MessageType::kAuth || type == MessageType::kReady;
  if (established_ == handshake_frame) {
    refuse("protocol error: frame type " + std::to_string(static_cast<int>(type)) +
               (established_ ? " after" : " before") + " the handshake",
           established_ ? &c.frame_errors : &c.handshake_failures);
    return;
  }
  switch (type) {
    case MessageType::kHello: on_hello(payload); return;
    case MessageType::kAuth: on_auth(payload); return;
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
    case MessageType::kPong:
      if (!decode_ping(payload)) refuse("broken frame: malformed pong", &c.frame_errors);
      return;  // any frame proves liveness (last_rx_)
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
  peer_nonce_ = h->nonce;
  if (peer_id_ == cfg.node_id) return refuse("refused: peer presents this daemon's own node id", &c.handshake_failures);
  if (role_ == Role::kInitiator && peer_id_ != expected_) {
    return refuse("refused: dialled " + expected_ + " but it says it is " + peer_id_, &c.handshake_failures);
  }
  const bool have_key = !channel_->key_.empty();
  if (have_key && !h->has_key) {
    return refuse("refused: authentication failed: the peer has no key and this daemon requires one",
                  &c.auth_failures);
  }
  if (!have_key && h->has_key) {
    return refuse("refused: authentication failed: the peer requires a key and no key_file is configured here",
                  &c.auth_failures);
  }
  if (have_key) {
    const bool init = role_ == Role::kInitiator;
    const std::string& initiator = init ? cfg.node_id : peer_id_;
    const std::string& acceptor = init ? peer_id_ : cfg.node_id;
    const Proof p = compute_proof(channel_->key_, peer_nonce_, initiator, acceptor,
                                  init ? Direction::kInitiator : Direction::kAcceptor);
    send(MessageType::kAuth, p);
  } else {
    peer_verified_ = true;
    send(MessageType::kReady, {});
  }
}

void Connection::on_auth(std::span<const uint8_t> payload) {
  auto& c = channel_->counters_;
  if (!hello_received_ || peer_verified_ || channel_->key_.empty()) {
    return refuse("protocol error: unexpected auth", &c.handshake_failures);
  }
  const bool init = role_ == Role::kInitiator;
  const std::string& own = channel_->config_.node_id;
  // The peer proves itself in the other direction, over the nonce this side chose.
  if (!verify_proof(channel_->key_, my_nonce_, init ? own : peer_id_, init ? peer_id_ : own,
                    init ? Direction::kAcceptor : Direction::kInitiator, payload)) {
    return refuse("refused: authentication failed: wrong proof (the keys differ)", &c.auth_failures);
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
  if (!peer_verified_ || !peer_ready_ || established_) return;
  established_ = true;
  channel_->counters_.handshakes_completed++;
  last_rx_ = Clock::now();
  channel_->on_established(shared_from_this());
}

void Connection::arm_timer() {
  const PeerConfig& cfg = channel_->config_;
  timer_.expires_after(established_ ? cfg.keepalive_interval : std::min(cfg.keepalive_interval, cfg.handshake_timeout));
  timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || self->closed_) return;
    self->on_timer();
  });
}

void Connection::on_timer() {
  const PeerConfig& cfg = channel_->config_;
  const auto now = Clock::now();
  if (!established_) {
    if (now - started_ >= cfg.handshake_timeout) {
      // A dial that never connected is a reachability problem, not a stranger.
      return refuse(connected_ ? "refused: handshake not completed in time" : "connect timed out",
                    connected_ ? &channel_->counters_.handshake_failures : nullptr);
    }
  } else if (now - last_rx_ >= cfg.keepalive_interval * cfg.keepalive_misses) {
    return refuse("dead: no answer to keepalive for " +
                      std::to_string((cfg.keepalive_interval * cfg.keepalive_misses).count()) + " ms",
                  &channel_->counters_.keepalive_timeouts);
  } else {
    send(MessageType::kPing, encode(Ping{++ping_seq_}));
  }
  arm_timer();
}

void Connection::refuse(const std::string& reason, uint64_t* counter) {
  if (counter != nullptr) (*counter)++;
  // An established connection's loss is logged once, by the channel, with this reason.
  if (!established_) channel_->log_->warn("peer {}: {}", describe(), reason);
  close(reason);
}

void Connection::close(const std::string& reason) {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  timer_.cancel();
  PeerChannel* ch = channel_;
  channel_ = nullptr;
  if (ch != nullptr) ch->on_closed(shared_from_this(), reason, established_);
}

void Connection::detach() {
  channel_ = nullptr;
  close("channel stopped");
}

}  // namespace rdmad::peer
