#include "rdmad/daemon/peer/peer_channel.h"

#include <algorithm>
#include <functional>

#include "connection.h"
#include "peer_log.h"
#include "rdmad/base/log_fields.h"
#include "rdmad/daemon/peer/auth.h"
#include "resolver.h"
#include "tls_context.h"

namespace rdmad::peer {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using std::chrono::milliseconds;

namespace {

// Accepting pauses this long after the first failure, doubling up to the maximum.
constexpr milliseconds kAcceptDelayMin{10};
constexpr milliseconds kAcceptDelayMax{1000};

bool is_wildcard(const asio::ip::address& a) { return a.is_unspecified(); }

const char* describe_security(const TlsContext* tls) {
  if (tls == nullptr) return "INSECURE: plaintext, peers not authenticated";
  return tls->security() == Security::kPsk ? "TLS 1.3, pre-shared key" : "TLS 1.3, mutual certificates";
}

}  // namespace

PeerChannel::PeerChannel(asio::io_context& io, PeerConfig config)
    : io_(io),
      config_(std::move(config)),
      log_(peer_logger()),
      stranger_log_(std::chrono::seconds(10), 5),
      accept_log_(std::chrono::seconds(10), 5),
      peer_log_(std::chrono::seconds(10), 64),
      acceptor_(io),
      accept_pause_(io),
      credentials_timer_(io),
      resolve_timer_(io),
      pump_timer_(io),
      discovery_log_(std::chrono::seconds(60), 5) {}

PeerChannel::~PeerChannel() { stop(); }

base::Status PeerChannel::start() {
  std::string error;
  if (config_.node_id.empty() || config_.node_id.size() > kMaxNodeIdBytes) {
    error = "peer: node id must be 1.." + std::to_string(kMaxNodeIdBytes) + " bytes";
    return base::Status::error(error);
  }
  const auto security = security_of(config_, &error);
  if (!security) return base::Status::error(error);
  if (*security != Security::kInsecure) {
    tls_ = TlsContext::load(config_, &error);
    if (!tls_) return base::Status::error(error);
  }
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(config_.listen_host, ec);
  if (ec) {
    error = "peer: listen address '" + config_.listen_host + "' is not an IP address";
    return base::Status::error(error);
  }
  const auto target = parse_discover_target(config_.discover, &error);
  if (!target) return base::Status::error("peer: discover: " + error);
  target_ = *target;
  const tcp::endpoint ep(address, config_.listen_port);
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    error = "peer: cannot listen on " + config_.listen_host + ":" + std::to_string(config_.listen_port) + ": " +
            ec.message();
    acceptor_.close(ec);
    return base::Status::error(error);
  }
  listen_port_ = acceptor_.local_endpoint().port();
  running_ = true;
  started_at_ = std::chrono::system_clock::now();
  for (const PeerAddress& a : config_.peers)
    history_[a.node_id].address = a.host + ":" + std::to_string(a.port);
  log_->log(tls_ ? spdlog::level::info : spdlog::level::warn, "peer channel listening node_id={} listen={}:{} security={}",
            config_.node_id, config_.listen_host, listen_port_, base::q(describe_security(tls_.get())));
  if (is_wildcard(address)) {
    log_->warn("peer channel on every address listen={} fix=\"listen on this node's management or NIC address\"",
               config_.listen_host);
  }
  accept();
  check_credentials();
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
  if (target_.kind != DiscoverTarget::Kind::kNone) {
    resolver_ = std::make_unique<Resolver>(io_);
    resolve_backoff_ = std::make_unique<Backoff>(std::chrono::milliseconds(1000),
                                                 std::max(config_.discover_interval, std::chrono::milliseconds(1000)),
                                                 0.2, seed);
    log_->info("peer discovery target={} interval_ms={} idle_session_ms={}", base::q(target_.text()),
               config_.discover_interval.count(), config_.idle_session.count());
    resolve();
  }
  return base::Status::success();
}

void PeerChannel::stop() {
  if (!running_) return;
  running_ = false;
  boost::system::error_code ec;
  acceptor_.close(ec);
  accept_pause_.cancel();
  credentials_timer_.cancel();
  resolve_timer_.cancel();
  pump_timer_.cancel();
  resolver_.reset();
  std::vector<std::shared_ptr<Connection>> all = accepted_;
  for (auto& [key, f] : found_)
    if (f.connection) all.push_back(f.connection);
  found_.clear();
  for (auto& [id, c] : established_) all.push_back(c);
  for (auto& d : dialers_) {
    d->timer->cancel();
    if (d->connection) all.push_back(d->connection);
  }
  accepted_.clear();
  accepted_per_source_.clear();
  established_.clear();
  dialers_.clear();
  for (auto& c : all) c->detach();
  counters_.peers_connected = 0;
}

const char* PeerChannel::security() const {
  if (tls_) return to_string(tls_->security());
  return config_.insecure ? "insecure" : "none";
}

uint64_t PeerChannel::queued_bytes(const std::string& peer) const {
  auto it = established_.find(peer);
  return it == established_.end() ? 0 : it->second->queued_bytes();
}

void PeerChannel::accept() {
  acceptor_.async_accept([this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec,
                                                                    tcp::socket socket) {
    if (alive.expired() || ec == asio::error::operation_aborted || !running_) return;
    if (ec) {
      on_accept_error(ec);
      return;
    }
    accept_delay_ = milliseconds(0);
    admit(std::move(socket));
    accept();
  });
}

void PeerChannel::on_accept_error(const boost::system::error_code& ec) {
  counters_.accept_errors++;
  if (ec == asio::error::connection_aborted) {  // that client gave up; the next one may be fine
    accept();
    return;
  }
  // Out of descriptors (EMFILE, ENFILE) or kernel memory: the connection stays in the backlog and
  // accepting again at once fails again at once (that loop once wrote 2.45 M log lines in 10 s).
  // Pause with a growing delay; the backlog holds the waiting peers meanwhile.
  accept_delay_ = std::clamp(accept_delay_ * 2, kAcceptDelayMin, kAcceptDelayMax);
  base::log_limited(*log_, accept_log_, spdlog::level::warn, "peer accept failed error={} pause_ms={}",
                    base::q(ec.message()), accept_delay_.count());
  accept_pause_.expires_after(accept_delay_);
  accept_pause_.async_wait([this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& e) {
    if (alive.expired() || e == asio::error::operation_aborted || !running_) return;
    accept();
  });
}

void PeerChannel::admit(tcp::socket socket) {
  counters_.connections_accepted++;
  boost::system::error_code ec;
  const auto ep = socket.remote_endpoint(ec);
  const std::string source = ec ? std::string("?") : ep.address().to_string();
  auto it = accepted_per_source_.find(source);
  const uint32_t from_source = it == accepted_per_source_.end() ? 0 : it->second;
  if (accepted_.size() >= config_.max_handshakes || from_source >= config_.max_handshakes_per_source) {
    counters_.connections_refused++;
    base::log_limited(*log_, accept_log_, spdlog::level::warn,
                      "peer connection refused source={} handshakes={} from_source={} limit={} "
                      "limit_per_source={}",
                      source, accepted_.size(), from_source, config_.max_handshakes, config_.max_handshakes_per_source);
    // A reset, not a FIN: no TIME_WAIT or half-closed state kept for a flood.
    socket.set_option(asio::socket_base::linger(true, 0), ec);
    socket.close(ec);
    return;
  }
  accepted_per_source_[source] = from_source + 1;
  auto c = std::make_shared<Connection>(*this, std::move(socket), Connection::Role::kAcceptor, "", tls_);
  c->set_source(source);
  accepted_.push_back(c);
  c->start();
}

void PeerChannel::forget_accepted(const std::shared_ptr<Connection>& c) {
  auto it = std::find(accepted_.begin(), accepted_.end(), c);
  if (it == accepted_.end()) return;
  accepted_.erase(it);
  auto s = accepted_per_source_.find(c->source());
  if (s != accepted_per_source_.end() && --s->second == 0) accepted_per_source_.erase(s);
}

void PeerChannel::check_credentials() {
  if (!tls_ || config_.credentials_check_interval.count() <= 0) return;
  credentials_timer_.expires_after(config_.credentials_check_interval);
  credentials_timer_.async_wait([this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec) {
    if (alive.expired() || ec == asio::error::operation_aborted || !running_) return;
    if (tls_->files_changed()) {
      // A rotated certificate (cert-manager renews before expiry): new connections use it, the
      // ones up keep their session. A half-written rotation fails to load and is tried again.
      std::string error;
      if (auto next = TlsContext::load(config_, &error)) {
        tls_ = std::move(next);
        counters_.credential_reloads++;
        log_->info("peer credentials reloaded security={}", base::q(describe_security(tls_.get())));
      } else {
        base::log_limited(*log_, peer_log_, spdlog::level::err,
                          "peer credentials not reloaded error={} kept=previous", base::q(error));
      }
    }
    check_credentials();
  });
}

void PeerChannel::dial(Dialer& d) {
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(d.address.host, ec);
  if (ec) {
    log_->error("peer not dialled peer={} host={} reason=not_an_ip_address", d.address.node_id, base::q(d.address.host));
    return;
  }
  d.connection =
      std::make_shared<Connection>(*this, tcp::socket(io_), Connection::Role::kInitiator, d.address.node_id, tls_);
  d.connection->connect(tcp::endpoint(address, d.address.port));
}

void PeerChannel::schedule_redial(Dialer& d) {
  if (!running_ || d.connection || connected(d.address.node_id)) return;
  const auto delay = d.backoff->next();
  log_->debug("peer redial peer={} delay_ms={}", d.address.node_id, delay.count());
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
  forget_accepted(c);
  if (!identify(c)) return;
  auto it = established_.find(peer);
  if (it != established_.end()) {
    counters_.duplicate_connections++;
    const Connection& old = *it->second;
    // Both daemons dialled each other at once: two connections of opposite directions come up
    // within a handshake of each other. Anything else is one more connection claiming an id that
    // is connected (an impostor, or a restarted peer whose old connection is not dead yet): the
    // established one stays; a dead one goes by keepalive and the redial gets in then.
    const bool cross_dial =
        old.role() != c->role() && Connection::Clock::now() - old.established_at() < config_.handshake_timeout;
    if (!cross_dial) {
      base::log_limited(*log_, peer_log_, spdlog::level::warn,
                        "peer connection refused peer={} reason=already_connected", base::q(c->describe()));
      c->close("duplicate connection: already connected");
      return;
    }
    // Both keep the connection the smaller node id opened.
    const std::string& winner = std::min(config_.node_id, peer);
    auto initiator_of = [&](const Connection& x) {
      return x.role() == Connection::Role::kInitiator ? config_.node_id : peer;
    };
    if (initiator_of(old) == winner) {
      c->close("duplicate connection");
      return;
    }
    it->second->close("duplicate connection");  // reports the old one down
  }
  established_[peer] = c;
  counters_.peers_connected = established_.size();
  note_up(*c);
  for (auto& d : dialers_) {
    if (d->address.node_id == peer) d->backoff->reset();
  }
  base::log_limited(*log_, peer_log_, spdlog::level::info, "peer connected peer={} role={} security={}",
                    base::q(c->describe()), c->role() == Connection::Role::kInitiator ? "dialled" : "accepted",
                    base::q(describe_security(tls_.get())));
  if (handlers_.on_up) handlers_.on_up(peer, c->role() == Connection::Role::kInitiator);
}

void PeerChannel::on_closed(const std::shared_ptr<Connection>& c, const std::string& why, bool was_established) {
  forget_accepted(c);
  const std::string peer = c->peer_id();
  std::string reason = why;
  if (auto a = idle_asked_.find(peer); a != idle_asked_.end() && a->second == c.get()) {
    idle_asked_.erase(a);
    if (was_established) {
      reason = "idle: closed at this node's request (no flow on either side for idle_session_ms)";
      counters_.idle_closes++;
    }
  }
  found_closed(c, reason, was_established);
  if (was_established) {
    auto it = established_.find(peer);
    if (it != established_.end() && it->second == c) {
      established_.erase(it);
      counters_.peers_connected = established_.size();
      note_closed(peer, reason, true);
      base::log_limited(*log_, peer_log_, spdlog::level::warn, "peer lost peer={} reason={}", base::q(c->describe()),
                        base::q(reason));
      if (handlers_.on_down) handlers_.on_down(peer, reason);
    }
  }
  for (auto& d : dialers_) {
    if (d->connection == c) {
      d->connection.reset();
      if (!was_established) note_closed(d->address.node_id, reason, false);
      if (!was_established && !d->failed_before) {
        base::log_limited(*log_, peer_log_, spdlog::level::info, "peer not connected yet peer={} reason={}",
                          d->address.node_id, base::q(reason));
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
  return it->second->send(type, payload);
}

void PeerChannel::disconnect(const std::string& peer, const std::string& reason) {
  auto it = established_.find(peer);
  if (it != established_.end()) {
    const std::shared_ptr<Connection> c = it->second;
    c->close(reason);
  }
}

void PeerChannel::on_frame(Connection& c, MessageType type, std::span<const uint8_t> payload) {
  if (handlers_.on_message) handlers_.on_message(c.peer_id(), type, payload);
}

}  // namespace rdmad::peer
