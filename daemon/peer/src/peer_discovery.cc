// PeerChannel's side of discovery through DNS: resolving on an interval (resolver.h), the set of
// discovered addresses and the node ids connections proved for them, dialling them when a node is
// wanted, and what peers() and the metrics show of them.
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

#include <fmt/format.h>

#include "connection.h"
#include "peer_log.h"
#include "rdmad/base/log_fields.h"
#include "rdmad/daemon/peer/peer_channel.h"
#include "resolver.h"

namespace rdmad::peer {

namespace asio = boost::asio;
using SteadyClock = std::chrono::steady_clock;

void PeerChannel::resolve() {
  if (!running_ || !resolver_ || resolving_) return;
  resolving_ = true;
  resolver_->resolve(target_, config_.discover_port, [this, alive = std::weak_ptr<int>(alive_)](Resolution r) {
    if (alive.expired() || !running_) return;
    resolving_ = false;
    on_resolved(std::move(r));
  });
}

void PeerChannel::on_resolved(Resolution r) {
  counters_.discovery_seconds = std::chrono::duration<double>(r.took).count();
  std::chrono::milliseconds next = config_.discover_interval;
  if (!r.error.empty()) {
    // Keep what the last good answer said: a DNS hiccup must not drop every peer.
    counters_.discovery_errors++;
    next = resolve_backoff_->next();
    base::log_limited(*log_, discovery_log_, spdlog::level::warn,
                      "peer discovery failed target={} error={} kept_addresses={} retry_ms={}", base::q(target_.text()),
                      base::q(r.error), found_.size(), next.count());
  } else {
    counters_.discovery_resolutions++;
    resolve_backoff_->reset();
    if (!r.note.empty() && (resolved_once_ ? !found_.empty() : true))
      base::log_limited(*log_, discovery_log_, spdlog::level::warn, "peer discovery target={} addresses={} note={}",
                        base::q(target_.text()), r.addresses.size(), base::q(r.note));
    resolved_once_ = true;
    apply_addresses(r.addresses);
  }
  resolve_timer_.expires_after(next);
  resolve_timer_.async_wait([this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec) {
    if (alive.expired() || ec == asio::error::operation_aborted || !running_) return;
    resolve();
  });
}

bool PeerChannel::is_own_address(const DiscoveredAddress& a) const {
  if (a.port != listen_port_) return false;
  boost::system::error_code ec, ec_listen;
  const auto want = asio::ip::make_address(a.host, ec);
  const auto listen = asio::ip::make_address(config_.listen_host, ec_listen);
  if (ec || ec_listen) return false;
  if (!listen.is_unspecified()) return want == listen;
  // Listening on every address: any address of this host's interfaces is this node.
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return false;
  bool own = false;
  for (ifaddrs* i = list; i != nullptr && !own; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    if (i->ifa_addr->sa_family == AF_INET && want.is_v4()) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      own = want.to_v4().to_uint() == ntohl(sin->sin_addr.s_addr);
    } else if (i->ifa_addr->sa_family == AF_INET6 && want.is_v6()) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      const auto bytes = want.to_v6().to_bytes();
      own = std::equal(bytes.begin(), bytes.end(), sin6->sin6_addr.s6_addr);
    }
  }
  ::freeifaddrs(list);
  return own;
}

void PeerChannel::apply_addresses(const std::vector<DiscoveredAddress>& addresses) {
  std::set<DiscoveredAddress> before;
  for (const auto& [key, f] : found_) before.insert(f.address);
  const std::set<DiscoveredAddress> after(addresses.begin(), addresses.end());
  const AddressDiff d = diff_addresses(before, after);
  if (d.empty()) return;
  const uint64_t seed = std::hash<std::string>{}(config_.node_id);
  for (const DiscoveredAddress& a : d.added) {
    Found f;
    f.address = a;
    f.self = is_own_address(a);
    f.since = std::chrono::system_clock::now();
    f.backoff = std::make_unique<Backoff>(config_.reconnect_min, config_.reconnect_max, config_.reconnect_jitter,
                                          seed ^ std::hash<std::string>{}(a.key()));
    found_.emplace(a.key(), std::move(f));
  }
  std::set<std::string> gone_nodes;
  for (const DiscoveredAddress& a : d.removed) {
    auto it = found_.find(a.key());
    if (it == found_.end()) continue;
    if (!it->second.node_id.empty() && !it->second.self) gone_nodes.insert(it->second.node_id);
    std::shared_ptr<Connection> c = std::move(it->second.connection);
    found_.erase(it);
    // A dial still in its handshake goes with its address; a session it became is decided below.
    if (c && !c->established()) c->close("address no longer discovered");
  }
  log_->info("peer discovery changed target={} added={} removed={} addresses={}", base::q(target_.text()),
             d.added.size(), d.removed.size(), found_.size());
  for (const std::string& node : gone_nodes) {
    const bool still_there = std::any_of(found_.begin(), found_.end(),
                                         [&](const auto& kv) { return kv.second.node_id == node; });
    // A node the DNS no longer names (a pod removed from the Service) is no longer used; a
    // [[peers]] entry keeps its own.
    if (!still_there && !static_peer(node) && connected(node))
      disconnect(node, "no longer discovered through " + target_.text());
  }
  update_discovery_gauges();
  pump();
}

PeerChannel::Found* PeerChannel::found_of(const Connection& c) {
  for (auto& [key, f] : found_)
    if (f.connection.get() == &c) return &f;
  return nullptr;
}

bool PeerChannel::wanted(const std::string& node) const {
  auto it = wanted_.find(node);
  return it != wanted_.end() && it->second >= SteadyClock::now();
}

void PeerChannel::want(const std::string& node, SteadyClock::time_point until) {
  if (!running_ || !discovering() || node.empty() || node == config_.node_id) return;
  auto& w = wanted_[node];
  w = std::max(w, until);
  pump();
}

void PeerChannel::dial_found(Found& f) {
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(f.address.host, ec);
  if (ec) {
    f.failed = true;
    f.last_error = "not an IP address";
    f.next_dial = SteadyClock::time_point::max();
    return;
  }
  // No expected id: the connection tells who is there, proven by its credential.
  f.connection = std::make_shared<Connection>(*this, asio::ip::tcp::socket(io_), Connection::Role::kInitiator, "", tls_);
  f.connection->connect(asio::ip::tcp::endpoint(address, f.address.port));
}

void PeerChannel::pump() {
  if (!running_ || found_.empty()) return;
  const auto now = SteadyClock::now();
  std::erase_if(wanted_, [&](const auto& kv) { return kv.second < now; });
  size_t dialling = 0;
  for (const auto& [key, f] : found_) dialling += f.connection && !f.connection->established();
  auto earliest = SteadyClock::time_point::max();
  for (const auto& [node, until] : wanted_) {
    if (connected(node) || static_peer(node)) continue;
    const bool identified = std::any_of(found_.begin(), found_.end(), [&](const auto& kv) {
      return kv.second.node_id == node && !kv.second.self;
    });
    for (auto& [key, f] : found_) {
      if (f.self || f.connection) continue;
      if (identified ? f.node_id != node : !f.node_id.empty()) continue;
      if (f.next_dial > now) {
        earliest = std::min(earliest, f.next_dial);
        continue;
      }
      if (dialling >= kMaxDiscoveryDials) break;
      dial_found(f);
      ++dialling;
    }
  }
  update_discovery_gauges();
  if (earliest == SteadyClock::time_point::max()) return;
  pump_timer_.expires_at(earliest);
  pump_timer_.async_wait([this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec) {
    if (alive.expired() || ec == asio::error::operation_aborted || !running_) return;
    pump();
  });
}

bool PeerChannel::identify(const std::shared_ptr<Connection>& c) {
  const std::string& peer = c->peer_id();
  if (c->role() == Connection::Role::kAcceptor) {
    // A discovered node that dialled us: its address (not the port, which is ephemeral) says which.
    for (auto& [key, f] : found_)
      if (f.node_id.empty() && f.address.host == c->source()) f.node_id = peer;
    return true;
  }
  Found* f = found_of(*c);
  if (f == nullptr) return true;
  if (f->node_id != peer) {
    // An address that now answers as another node (a reused pod IP): the proof wins.
    if (!f->node_id.empty())
      log_->info("peer discovered address changed node address={} was={} now={}", f->address.key(), f->node_id, peer);
    f->node_id = peer;
  }
  f->failed = false;
  f->last_error.clear();
  f->backoff->reset();
  if (wanted(peer) && !connected(peer)) return true;
  // Dialled only to learn who is there (or a node that is connected already): no session.
  std::shared_ptr<Connection> keep = std::move(f->connection);
  keep->close("identified");
  return false;
}

void PeerChannel::found_closed(const std::shared_ptr<Connection>& c, const std::string& reason, bool was_established) {
  Found* f = found_of(*c);
  if (f == nullptr) return;
  f->connection.reset();
  if (c->peer_id() == config_.node_id) {
    f->self = true;  // it answered with our own id
    f->node_id = config_.node_id;
  } else if (!was_established) {
    f->failed = true;
    f->last_error = reason;
    f->since = std::chrono::system_clock::now();
    f->next_dial = SteadyClock::now() + f->backoff->next();
  } else {
    f->since = std::chrono::system_clock::now();
    f->next_dial = SteadyClock::now() + f->backoff->next();
  }
  // Whoever still wants a node gets the next address tried (or this one after its back-off).
  asio::post(io_, [this, alive = std::weak_ptr<int>(alive_)] {
    if (!alive.expired() && running_) pump();
  });
}

void PeerChannel::update_discovery_gauges() {
  uint64_t discovered = 0, failed = 0;
  for (const auto& [key, f] : found_) {
    if (f.self) continue;
    ++discovered;
    failed += f.failed && !f.connection;
  }
  counters_.peers_discovered = discovered;
  counters_.peers_failed = failed;
}

bool PeerChannel::known_absent(const std::string& node) const {
  if (!discovering() || !resolved_once_ || connected(node)) return false;
  for (const auto& [key, f] : found_) {
    if ((f.connection && !f.connection->established()) || (f.node_id.empty() && !f.self)) return false;
    if (f.node_id == node) return false;
  }
  return true;
}

std::string PeerChannel::discovery_state(const std::string& node) const {
  if (!discovering()) return "no [peer] discover";
  if (!resolved_once_) return target_.text() + " has not resolved yet";
  std::vector<std::string> mine, others, unknown, failing;
  size_t addresses = 0;
  for (const auto& [key, f] : found_) {
    if (f.self) continue;
    ++addresses;
    if (f.node_id == node) {
      mine.push_back(key + (f.last_error.empty() ? "" : ": " + f.last_error));
    } else if (f.failed) {
      failing.push_back(key + ": " + f.last_error);
    } else if (f.node_id.empty()) {
      unknown.push_back(key + (f.connection ? " (dialling)" : ""));
    } else {
      others.push_back(f.node_id);
    }
  }
  std::string out = fmt::format("{} names {} address{} besides this node's", target_.text(), addresses,
                                addresses == 1 ? "" : "es");
  auto list = [&](const std::string& what, const std::vector<std::string>& v) {
    if (v.empty()) return;
    const size_t n = std::min<size_t>(v.size(), 8);
    out += fmt::format("; {}{}{}", what, fmt::join(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n), ", "),
                       v.size() > n ? fmt::format(" and {} more", v.size() - n) : "");
  };
  list("known as " + node + ": ", mine);
  list("identified as ", others);
  list("not identified yet: ", unknown);
  list("unreachable: ", failing);
  return out;
}

std::vector<std::string> PeerChannel::established_peers() const {
  std::vector<std::string> out;
  for (const auto& [id, c] : established_) out.push_back(id);
  return out;
}

void PeerChannel::send_idle(const std::string& peer) {
  auto it = established_.find(peer);
  if (it == established_.end()) return;
  if (it->second->send(MessageType::kIdle, {})) idle_asked_[peer] = it->second.get();
}

void PeerChannel::close_idle(const std::string& peer) {
  if (!connected(peer)) return;
  counters_.idle_closes++;
  idle_asked_.erase(peer);
  disconnect(peer, "idle: closed at the peer's request (no flow on either side for idle_session_ms)");
}

}  // namespace rdmad::peer
