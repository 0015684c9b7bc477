#include "rdmad/peer/peer_channel.h"

#include <algorithm>
#include <functional>

#include "connection.h"
#include "peer_log.h"

namespace rdmad::peer {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

PeerChannel::PeerChannel(asio::io_context& io, PeerConfig config)
    : io_(io), config_(std::move(config)), log_(peer_logger()), acceptor_(io) {}

PeerChannel::~PeerChannel() { stop(); }

bool PeerChannel::start(std::string& error) {
  if (config_.node_id.empty() || config_.node_id.size() > kMaxNodeIdBytes) {
    error = "peer: node id must be 1.." + std::to_string(kMaxNodeIdBytes) + " bytes";
    return false;
  }
  if (!config_.key_file.empty()) {
    std::string warning;
    auto key = load_key_file(config_.key_file, &error, &warning);
    if (!key) return false;
    if (!warning.empty()) log_->warn("{}", warning);
    key_ = std::move(*key);
  }
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(config_.listen_host, ec);
  if (ec) {
    error = "peer: listen address '" + config_.listen_host + "' is not an IP address";
    return false;
  }
  const tcp::endpoint ep(address, config_.listen_port);
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    error = "peer: cannot listen on " + config_.listen_host + ":" + std::to_string(config_.listen_port) + ": " +
            ec.message();
    acceptor_.close(ec);
    return false;
  }
  listen_port_ = acceptor_.local_endpoint().port();
  running_ = true;
  log_->info("peer channel of node {} listening on {}:{} ({})", config_.node_id, config_.listen_host, listen_port_,
             key_.empty() ? "no authentication" : "HMAC-SHA256 authentication");
  accept();
  const uint64_t seed = std::hash<std::string>{}(config_.node_id) ^ random_nonce()[0];
  for (const PeerAddress& a : config_.peers) {
    auto d = std::make_unique<Dialer>();
    d->address = a;
    d->timer = std::make_unique<asio::steady_timer>(io_);
    d->backoff = std::make_unique<Backoff>(config_.reconnect_min, config_.reconnect_max, config_.reconnect_jitter,
                                           seed + dialers_.size());
    dialers_.push_back(std::move(d));
    dial(*dialers_.back());
  }
  return true;
}

void PeerChannel::stop() {
  if (!running_) return;
  running_ = false;
  boost::system::error_code ec;
  acceptor_.close(ec);
  std::vector<std::shared_ptr<Connection>> all = accepted_;
  for (auto& [id, c] : established_) all.push_back(c);
  for (auto& d : dialers_) {
    d->timer->cancel();
    if (d->connection) all.push_back(d->connection);
  }
  accepted_.clear();
  established_.clear();
  dialers_.clear();
  for (auto& c : all) c->detach();
  counters_.peers_connected = 0;
}

void PeerChannel::accept() {
  acceptor_.async_accept([this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec,
                                                                    tcp::socket socket) {
    if (alive.expired() || ec == asio::error::operation_aborted || !running_) return;
    if (!ec) {
      counters_.connections_accepted++;
      auto c = std::make_shared<Connection>(*this, std::move(socket), Connection::Role::kAcceptor, "");
      accepted_.push_back(c);
      c->start();
    } else {
      log_->warn("peer: accept failed: {}", ec.message());
    }
    accept();
  });
}

void PeerChannel::dial(Dialer& d) {
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(d.address.host, ec);
  if (ec) {
    log_->error("peer {}: '{}' is not an IP address; not dialling it", d.address.node_id, d.address.host);
    return;
  }
  d.connection = std::make_shared<Connection>(*this, tcp::socket(io_), Connection::Role::kInitiator, d.address.node_id);
  d.connection->connect(tcp::endpoint(address, d.address.port));
}

void PeerChannel::schedule_redial(Dialer& d) {
  if (!running_ || d.connection || connected(d.address.node_id)) return;
  const auto delay = d.backoff->next();
  log_->debug("peer {}: redialling in {} ms", d.address.node_id, delay.count());
  d.timer->expires_after(delay);
  d.timer->async_wait([this, &d, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec) {
    // A handler already queued when the channel stopped or went away must not touch it (or d).
    if (alive.expired() || ec == asio::error::operation_aborted || !running_) return;
    if (d.connection || connected(d.address.node_id)) return;
    counters_.reconnects++;
    dial(d);
  });
}

void PeerChannel::on_established(const std::shared_ptr<Connection>& c) {
  const std::string& peer = c->peer_id();
  std::erase(accepted_, c);
  auto it = established_.find(peer);
  if (it != established_.end()) {
    // Both daemons dialled each other: both keep the connection the smaller node id opened.
    const std::string& winner = std::min(config_.node_id, peer);
    auto initiator_of = [&](const Connection& x) {
      return x.role() == Connection::Role::kInitiator ? config_.node_id : peer;
    };
    counters_.duplicate_connections++;
    if (initiator_of(*it->second) == winner) {
      c->close("duplicate connection");
      return;
    }
    it->second->close("duplicate connection");  // reports the old one down
  }
  established_[peer] = c;
  counters_.peers_connected = established_.size();
  for (auto& d : dialers_) {
    if (d->address.node_id == peer) d->backoff->reset();
  }
  log_->info("peer {}: connected ({}, {})", c->describe(), c->role() == Connection::Role::kInitiator ? "dialled" : "accepted",
             key_.empty() ? "unauthenticated" : "authenticated both ways");
  if (handlers_.on_up) handlers_.on_up(peer, c->role() == Connection::Role::kInitiator);
}

void PeerChannel::on_closed(const std::shared_ptr<Connection>& c, const std::string& reason, bool was_established) {
  std::erase(accepted_, c);
  const std::string peer = c->peer_id();
  if (was_established) {
    auto it = established_.find(peer);
    if (it != established_.end() && it->second == c) {
      established_.erase(it);
      counters_.peers_connected = established_.size();
      log_->warn("peer {}: lost: {}", c->describe(), reason);
      if (handlers_.on_down) handlers_.on_down(peer, reason);
    }
  }
  for (auto& d : dialers_) {
    if (d->connection == c) {
      d->connection.reset();
      if (!was_established && !d->failed_before) {
        log_->info("peer {}: cannot connect yet: {}", d->address.node_id, reason);
      }
      d->failed_before = !was_established;
    }
    // Redial whatever is now missing (this connection, or another that lost the peer).
    if (d->address.node_id == c->expected_peer() || d->address.node_id == peer) schedule_redial(*d);
  }
}

bool PeerChannel::send(const std::string& peer, MessageType type, std::span<const uint8_t> payload) {
  auto it = established_.find(peer);
  if (it == established_.end()) return false;
  it->second->send(type, payload);
  return true;
}

void PeerChannel::disconnect(const std::string& peer, const std::string& reason) {
  auto it = established_.find(peer);
  if (it != established_.end()) it->second->close(reason);
}

void PeerChannel::on_frame(Connection& c, MessageType type, std::span<const uint8_t> payload) {
  if (handlers_.on_message) handlers_.on_message(c.peer_id(), type, payload);
}

}  // namespace rdmad::peer
