// PeerChannel::peers(): what an operator sees of each peer (rdmactl peers), from the live
// connections and a short history per peer (when it came up or went down, the last error).
#include <algorithm>
#include <map>

#include "connection.h"
#include "rdmad/daemon/peer/peer_channel.h"

namespace rdmad::peer {

const PeerChannel::Dialer* PeerChannel::dialer_of(const std::string& peer) const {
  for (const auto& d : dialers_)
    if (d->address.node_id == peer) return d.get();
  return nullptr;
}

void PeerChannel::note_up(const Connection& c) {
  const std::string& peer = c.peer_id();
  if (history_.count(peer) == 0 && history_.size() >= kMaxHistory) {
    // Forget the peer that has been down longest and that this node does not dial.
    auto oldest = history_.end();
    for (auto it = history_.begin(); it != history_.end(); ++it) {
      if (it->second.up || dialer_of(it->first) != nullptr) continue;
      if (oldest == history_.end() || it->second.since < oldest->second.since) oldest = it;
    }
    if (oldest != history_.end()) history_.erase(oldest);
  }
  History& h = history_[peer];
  h.up = true;
  h.since = std::chrono::system_clock::now();
  if (dialer_of(peer) == nullptr) h.address = c.remote();
}

void PeerChannel::note_closed(const std::string& peer, const std::string& reason, bool was_up) {
  auto it = history_.find(peer);
  if (it == history_.end()) return;  // a stranger, or an accepted peer before it was established
  it->second.last_error = reason;
  if (was_up && it->second.up) {
    it->second.up = false;
    it->second.since = std::chrono::system_clock::now();
  }
}

std::vector<PeerChannel::PeerStatus> PeerChannel::peers() const {
  std::vector<PeerStatus> out;
  // Discovered addresses by the node they proved to be (one line per node: its first address).
  std::map<std::string, const Found*> found_nodes;
  for (const auto& [key, f] : found_)
    if (!f.self && !f.node_id.empty()) found_nodes.try_emplace(f.node_id, &f);
  auto from_found = [&](const std::string& id) -> const Found* {
    auto it = found_nodes.find(id);
    return it == found_nodes.end() ? nullptr : it->second;
  };
  for (const auto& [id, h] : history_) {
    PeerStatus s;
    s.node_id = id;
    s.address = h.address;
    s.last_error = h.last_error;
    s.since = h.since.time_since_epoch().count() == 0 ? started_at_ : h.since;
    const Dialer* d = dialer_of(id);
    const Found* f = from_found(id);
    s.dialled = d != nullptr;
    s.source = d != nullptr ? PeerStatus::Source::kStatic : f != nullptr ? PeerStatus::Source::kDns : PeerStatus::Source::kAccepted;
    if (d == nullptr && f != nullptr) s.address = f->address.key();
    if (auto e = established_.find(id); e != established_.end()) {
      s.state = PeerStatus::State::kConnected;
      s.rtt = e->second->rtt();
    } else if ((d != nullptr && d->connection) || (f != nullptr && f->connection)) {
      s.state = PeerStatus::State::kConnecting;
    }
    out.push_back(std::move(s));
  }
  // Discovered nodes never up here (identified only), then the addresses nobody identified yet.
  auto add_found = [&](const Found& f) {
    PeerStatus s;
    s.node_id = f.node_id;
    s.address = f.address.key();
    s.source = PeerStatus::Source::kDns;
    s.state = f.connection ? PeerStatus::State::kConnecting : PeerStatus::State::kDown;
    s.last_error = f.last_error;
    s.since = f.since;
    out.push_back(std::move(s));
  };
  for (const auto& [id, f] : found_nodes)
    if (history_.count(id) == 0) add_found(*f);
  for (const auto& [key, f] : found_)
    if (!f.self && f.node_id.empty()) add_found(f);
  return out;
}

}  // namespace rdmad::peer
