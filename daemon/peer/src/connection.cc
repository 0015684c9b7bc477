// Connection: transport (plain TCP or TLS), framing, the bounded send queue with back-pressure,
// keepalive and closing. The handshake is in connection_handshake.cc.
#include "connection.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "rdmad/base/log_fields.h"
#include "rdmad/base/log_limiter.h"
#include "rdmad/daemon/peer/peer_channel.h"

namespace rdmad::peer {

namespace asio = boost::asio;

Connection::Connection(PeerChannel& channel, asio::ip::tcp::socket socket, Role role, std::string expected_peer,
                       std::shared_ptr<TlsContext> tls)
    : channel_(&channel),
      socket_(std::move(socket)),
      tls_context_(std::move(tls)),
      timer_(socket_.get_executor()),
      role_(role),
      expected_(std::move(expected_peer)) {}

std::string Connection::describe() const {
  const std::string& id = peer_id_.empty() ? expected_ : peer_id_;
  if (id.empty()) return remote_;
  return id + " (" + remote_ + ")";
}

template <typename Buffer, typename Handler>
void Connection::read_exact(const Buffer& buffer, Handler&& handler) {
  reading_ = true;
  if (tls_) {
    asio::async_read(*tls_, buffer, std::forward<Handler>(handler));
  } else {
    asio::async_read(socket_, buffer, std::forward<Handler>(handler));
  }
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

bool Connection::send(MessageType type, std::span<const uint8_t> payload) {
  if (closed_ || overflowed_) return false;
  std::vector<uint8_t> frame = encode_frame(type, payload);
  const uint64_t limit = channel_->config_.send_queue_bytes;
  if (queued_bytes_ + frame.size() > limit) {
    // The peer has not read half a queue's worth for a while although we stopped reading from it:
    // drop it rather than grow without bound (it reconnects with a fresh session). The close is
    // posted: the caller may be in the middle of sending to many peers, and the loss handlers
    // must not run inside its loop.
    overflowed_ = true;
    channel_->counters_.send_queue_overflows++;
    asio::post(socket_.get_executor(), [self = shared_from_this(), queued = queued_bytes_] {
      if (self->closed_) return;
      self->refuse("send queue full: " + std::to_string(queued) + " bytes queued, the peer does not read", nullptr);
    });
    return false;
  }
  queued_bytes_ += frame.size();
  out_.push_back(std::move(frame));
  if (queued_bytes_ > limit / 2) read_paused_ = true;
  if (!writing_) write_next();
  return true;
}

void Connection::write_next() {
  if (out_.empty() || closed_) {
    writing_ = false;
    return;
  }
  writing_ = true;
  auto done = [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
    if (self->closed_) return;
    if (ec) {
      self->close("write failed: " + ec.message());
      return;
    }
    self->queued_bytes_ -= self->out_.front().size();
    self->out_.pop_front();
    if (self->read_paused_ && self->queued_bytes_ <= self->channel_->config_.send_queue_bytes / 4) {
      self->read_paused_ = false;
      if (!self->reading_) self->read_header();
    }
    self->write_next();
  };
  if (tls_) {
    asio::async_write(*tls_, asio::buffer(out_.front()), std::move(done));
  } else {
    asio::async_write(socket_, asio::buffer(out_.front()), std::move(done));
  }
}

void Connection::read_header() {
  read_exact(asio::buffer(header_), [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
    self->reading_ = false;
    if (self->closed_) return;
    if (ec) {
      const bool eof = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
      self->close(eof ? "connection closed by the peer" : "read failed: " + ec.message());
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
  read_exact(asio::buffer(body_), [self = shared_from_this(), type](const boost::system::error_code& ec, size_t) {
    self->reading_ = false;
    if (self->closed_) return;
    if (ec) {
      const bool eof = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
      self->close(eof ? "connection closed by the peer" : "read failed: " + ec.message());
      return;
    }
    self->last_rx_ = Clock::now();
    self->handle(static_cast<MessageType>(type), self->body_);
    self->after_frame();
  });
}

void Connection::after_frame() {
  // Back-pressure: while the peer leaves our frames unread, its next requests wait in TCP.
  if (!closed_ && !read_paused_) read_header();
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
    ping_sent_at_ = now;
    send(MessageType::kPing, encode(Ping{++ping_seq_}));
    if (closed_) return;
  }
  arm_timer();
}

void Connection::refuse(const std::string& reason, uint64_t* counter) {
  if (counter != nullptr) (*counter)++;
  // An established connection's loss is logged once, by the channel, with this reason. Anything
  // before that a stranger can cause at will: rate-limited.
  if (!established_) {
    base::log_limited(*channel_->log_, channel_->stranger_log_, spdlog::level::warn, "peer refused peer={} reason={}",
                      base::q(describe()), base::q(reason));
  }
  close(reason);
}

void Connection::close(const std::string& reason) {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  // No TLS close_notify: the peer learns from the TCP close, and a peer that stopped reading
  // cannot make us wait for one.
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  timer_.cancel();
  // out_ stays until the connection goes: a write in flight may still refer to its front.
  PeerChannel* ch = channel_;
  channel_ = nullptr;
  if (ch != nullptr) ch->on_closed(shared_from_this(), reason, established_);
}

void Connection::detach() {
  channel_ = nullptr;
  close("channel stopped");
}

}  // namespace rdmad::peer
