// PeerChannel::peers(): what an operator sees of each peer (rdmactl peers), from the live
// connections and a short history per peer (when it came up or went down, the last error).
#include <algorithm>

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
  for (const auto& [id, h] : history_) {
    PeerStatus s;
    s.node_id = id;
    s.address = h.address;
    s.last_error = h.last_error;
    s.since = h.since.time_since_epoch().count() == 0 ? started_at_ : h.since;
    const Dialer* d = dialer_of(id);
    s.dialled = d != nullptr;
    if (auto e = established_.find(id); e != established_.end()) {
      s.state = PeerStatus::State::kConnected;
      s.rtt = e->second->rtt();
    } else if (d != nullptr && d->connection) {
      s.state = PeerStatus::State::kConnecting;
    }
    out.push_back(std::move(s));
  }
  return out;  // history_ is a map: node id order
}

}  // namespace rdmad::peer
