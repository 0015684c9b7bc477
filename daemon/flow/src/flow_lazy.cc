// FlowService: sessions to nodes found through discovery are opened lazily and closed when idle.
//
// A flow open or an export naming a node whose session is not ready — and that no [[peers]]
// entry names — waits (at most session_wait(), twice the handshake timeout) while the channel
// dials the addresses that node may be at (PeerChannel::want). It goes on when the session is
// ready, and fails with RDMAD_ERR_PEER (retryable) when the wait ends or discovery knows the node
// is not there. Every tick the nodes that open flows still need are wanted again, so flows whose
// session was lost reconnect once the node is discovered again. A session neither side uses (no
// flow, export, grant or waiting request) for idle_session_ms is closed: this side asks with an
// idle frame, the other closes the connection unless it uses the session (it is asked again after
// another idle period). [[peers]] sessions are never closed as idle.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "rdmad/base/log_fields.h"
#include "rdmad/daemon/flow/flow_service.h"
#include "rdmad/daemon/peer/peer_channel.h"
#include "rdmad/daemon/peer/peer_session.h"
#include "engine_state.h"
#include "service_state.h"

namespace rdmad::flow {

using SteadyClock = std::chrono::steady_clock;

std::chrono::milliseconds FlowService::session_wait() const {
  return std::max(std::chrono::milliseconds(1000), 2 * options_.peer.handshake_timeout);
}

std::chrono::milliseconds FlowService::tick_interval() const {
  const auto idle = options_.peer.idle_session;
  if (idle.count() <= 0) return std::chrono::milliseconds(500);
  return std::clamp(idle / 4, std::chrono::milliseconds(50), std::chrono::milliseconds(500));
}

bool FlowService::needs_session_wait(const std::string& peer) const {
  return channel_ && channel_->discovering() && !channel_->static_peer(peer) && session_->ready(peer) == nullptr;
}

size_t FlowService::waiting_of(uint64_t conn_id) const {
  return static_cast<size_t>(
      std::count_if(waiters_.begin(), waiters_.end(), [&](const Waiter& w) { return w.conn_id == conn_id; }));
}

clients::Error FlowService::not_found(const std::string& peer, const char* why) const {
  return clients::Error{RDMAD_ERR_PEER, fmt::format("peer {} {}: {}; retry later", peer, why,
                                                    channel_->discovery_state(peer))};
}

void FlowService::wait_for_session(uint64_t conn_id, const std::string& peer,
                                   std::function<void(const clients::Error*)> go) {
  if (waiters_.size() >= kMaxWaiters) {
    const clients::Error e{RDMAD_ERR_NO_RESOURCE, fmt::format("{} requests already wait for peer sessions", kMaxWaiters)};
    return go(&e);
  }
  size_t mine = waiting_of(conn_id);
  for (const auto& [id, f] : flows_) mine += f.conn_id == conn_id;
  if (mine >= options_.max_flows_per_client) {
    const clients::Error e{RDMAD_ERR_NO_RESOURCE, fmt::format("this connection already has {} flows open or waiting "
                                                              "(max_flows_per_client)", mine)};
    return go(&e);
  }
  if (channel_->known_absent(peer)) {
    const clients::Error e = not_found(peer, "is not a discovered node");
    return go(&e);
  }
  const auto now = SteadyClock::now();
  waiters_.push_back(Waiter{conn_id, peer, now + session_wait(), std::move(go)});
  // Wanted while it waits: every tick renews it, so the want ends soon after the wait does.
  channel_->want(peer, now + 2 * tick_interval());
}

void FlowService::resume_waiters(const std::string& peer) {
  std::vector<Waiter> ready;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->peer == peer) {
      ready.push_back(std::move(*it));
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
  for (Waiter& w : ready) w.go(nullptr);
}

bool FlowService::in_use(const std::string& peer) const {
  if (std::any_of(flows_.begin(), flows_.end(), [&](const auto& kv) { return kv.second.peer == peer; })) return true;
  if (std::any_of(exports_.begin(), exports_.end(), [&](const auto& kv) { return kv.second.peer == peer; }))
    return true;
  if (auto g = grants_by_peer_.find(peer); g != grants_by_peer_.end() && g->second > 0) return true;
  return std::any_of(waiters_.begin(), waiters_.end(), [&](const Waiter& w) { return w.peer == peer; });
}

void FlowService::start_lazy() {
  if (!channel_->discovering()) return;
  idle_ = std::make_unique<peer::IdleSessions>(options_.peer.idle_session);
  lazy_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
  lazy_tick();
}

void FlowService::lazy_tick() {
  const auto now = SteadyClock::now();
  // Waits that ended: the deadline passed, or discovery knows the node is not there.
  std::vector<std::pair<Waiter, clients::Error>> ended;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    const bool absent = channel_->known_absent(it->peer);
    if (absent || now >= it->deadline) {
      clients::Error e = absent ? not_found(it->peer, "is not a discovered node")
                                : not_found(it->peer, fmt::format("was not reached within {} ms",
                                                                  session_wait().count()).c_str());
      ended.emplace_back(std::move(*it), std::move(e));
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [w, e] : ended) w.go(&e);
  // Flows whose session is gone keep wanting their node: they reconnect when it is found again.
  // Shorter than the idle time (tick_interval() is at most a quarter of it): a node no longer
  // needed is not redialled after its session was closed as idle.
  const auto until = now + 2 * tick_interval();
  std::set<std::string> need;
  for (const auto& [id, f] : flows_)
    if (session_->ready(f.peer) == nullptr && !channel_->static_peer(f.peer)) need.insert(f.peer);
  for (const Waiter& w : waiters_) need.insert(w.peer);
  for (const std::string& p : need) channel_->want(p, until);
  // Idle sessions.
  std::map<std::string, bool> connected;
  for (const std::string& p : channel_->established_peers())
    if (!channel_->static_peer(p)) connected[p] = in_use(p);
  for (const std::string& p : idle_->tick(now, connected)) {
    flow_log()->info("peer session idle peer={} idle_ms={} action=ask_to_close", p, idle_->idle().count());
    channel_->send_idle(p);
  }
  lazy_timer_->expires_after(tick_interval());
  std::weak_ptr<int> alive = alive_;
  lazy_timer_->async_wait([this, alive](const boost::system::error_code& ec) {
    if (!ec && alive.lock() && started_) lazy_tick();
  });
}

void FlowService::on_idle_request(const std::string& peer) {
  const bool refuse = options_.peer.idle_session.count() <= 0 || channel_->static_peer(peer) || in_use(peer);
  flow_log()->info("peer session idle request peer={} action={}", peer, refuse ? "kept" : "closed");
  if (!refuse) channel_->close_idle(peer);
}

}  // namespace rdmad::flow
