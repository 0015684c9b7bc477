// Exports, grants and imports: who may touch which remote memory.
//
// An export registers its own MR over exactly the exported range with exactly the granted rights,
// in the protection domain of the one peer it is for (peer_domain.h), so the NIC itself refuses
// an access outside it, one with other rights, or one from any other peer's QPs — even from a
// misbehaving peer daemon. The grant is sent to that peer, which acknowledges it before the
// client gets its token. The importing daemon checks rights and bounds again before it posts.
#include "engine_state.h"
#include "peer_domain.h"
#include "rdmad/base/log_fields.h"
#include "rdmad/base/log_limiter.h"
#include "rdmad/base/trace_points.h"
#include "rdmad/daemon/clients/session_store.h"
#include "rdmad/daemon/peer/peer_channel.h"
#include "rdmad/daemon/peer/peer_session.h"
#include "service_state.h"

namespace rdmad::flow {
namespace {

FlowService::Token to_token(const uint8_t (&bytes)[16]) {
  FlowService::Token t;
  std::memcpy(t.data(), bytes, t.size());
  return t;
}

// The access of an export's MR: exactly the rights granted (a remote write needs local write).
uint32_t export_access(uint32_t rights) {
  uint32_t a = 0;
  if (rights & RDMAD_ACCESS_REMOTE_WRITE) a |= RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE;
  if (rights & RDMAD_ACCESS_REMOTE_READ) a |= RDMAD_ACCESS_REMOTE_READ;
  return a;
}

// Log lines a peer's flow messages can cause.
base::LogLimiter g_refusal_log;

}  // namespace

void FlowService::export_memory(const clients::Peer& client, const proto::ExportRequest& req,
                                std::function<void(clients::Result<proto::ExportReply>)> done) {
  const std::string peer(req.peer);
  if (peer != options_.peer.node_id && needs_session_wait(peer)) {
    wait_for_session(client.conn_id, peer, [this, client, req, done](const clients::Error* e) {
      if (e != nullptr) return done(*e);
      export_now(client, req, done);
    });
    return;
  }
  export_now(client, req, std::move(done));
}

void FlowService::export_now(const clients::Peer& client, const proto::ExportRequest& req,
                             std::function<void(clients::Result<proto::ExportReply>)> done) {
  const std::string peer(req.peer);
  if (!channel_->connected(peer)) {
    done(clients::Error{RDMAD_ERR_PEER, "peer " + peer + " is not connected"});
    return;
  }
  const uint32_t quota = registrations_.quota_for(client.tenant()).max_exports;
  if (exports_by_tenant_[client.tenant()] >= quota) {
    done(clients::Error{RDMAD_ERR_QUOTA,
                        client.tenant().name() + " holds " + std::to_string(quota) + " exports (its export quota)"});
    return;
  }
  auto pinned = registrations_.pin(client.conn_id, req.handle, req.offset, req.length, req.rights);
  if (!pinned.ok()) {
    done(pinned.error());
    return;
  }
  Export e;
  e.token = clients::random_token();
  e.conn_id = client.conn_id;
  e.owner_uid = client.uid;
  e.owner_tenant = client.tenant();
  ++exports_by_tenant_[client.tenant()];
  e.peer = peer;
  e.handle = req.handle;
  e.offset = req.offset;
  e.range = pinned.value();
  e.rights = req.rights;
  e.done = std::move(done);
  auto [it, fresh] = exports_.emplace(e.token, std::move(e));
  grant(it);
}

bool FlowService::grant(std::map<Token, Export>::iterator it) {
  Export& e = it->second;
  if (!e.mrs) {
    std::string error;
    PeerDomain* domain = domain_for(e.peer, &error);
    auto made = domain != nullptr ? domain->register_exact(e.range, export_access(e.rights))
                                  : clients::Result<ExactRegion>(clients::Error{RDMAD_ERR_SYSTEM, error});
    if (!made.ok()) {
      auto done = std::move(e.done);
      e.done = nullptr;
      base::log_limited(*flow_log(), g_refusal_log, spdlog::level::warn, "export refused peer={} error={}", e.peer,
                        base::q(made.error().message));
      drop_export(it, false);
      if (done) done(made.error());
      return false;
    }
    e.mrs = std::make_unique<ExactRegion>(std::move(made.value()));
  }
  send_grant(e);
  return true;
}

void FlowService::send_grant(const Export& e) {
  peer::Grant g;
  g.token = e.token;
  g.iova = e.range.iova;
  g.length = e.range.length;
  g.rights = e.rights;
  g.keys = e.mrs->grant_keys;
  channel_->send(e.peer, peer::MessageType::kGrant, peer::encode(g));
}

void FlowService::drop_export(std::map<Token, Export>::iterator it, bool tell_peer) {
  Export& e = it->second;
  if (tell_peer && channel_ && channel_->connected(e.peer))
    channel_->send(e.peer, peer::MessageType::kRevoke, peer::encode(peer::Revoke{e.token}));
  if (e.done) e.done(clients::Error{RDMAD_ERR_CONNECTION, "export withdrawn before the peer acknowledged it"});
  // Deregistered before we return: no packet with its keys touches the memory after a revoke.
  e.mrs.reset();
  registrations_.unpin(e.range.pin);
  if (auto u = exports_by_tenant_.find(e.owner_tenant); u != exports_by_tenant_.end() && --u->second == 0)
    exports_by_tenant_.erase(u);
  if (store_ != nullptr) store_->export_dropped(e.token);
  exports_.erase(it);
}

size_t FlowService::restore_exports(const std::vector<clients::StoredSession>& sessions,
                                    const std::vector<clients::StoredExport>& exports) {
  std::map<uint64_t, const clients::StoredSession*> owners;
  for (const auto& s : sessions) owners[s.conn_id] = &s;
  size_t restored = 0;
  for (const auto& x : exports) {
    auto owner = owners.find(x.conn_id);
    auto pinned = owner == owners.end()
                      ? clients::Result<clients::PinnedRange>(clients::Error{RDMAD_ERR_NOT_FOUND, "no session"})
                      : registrations_.pin(x.conn_id, x.handle, x.offset, x.length, x.rights);
    if (!pinned.ok()) {
      base::log_limited(*flow_log(), g_refusal_log, spdlog::level::warn, "export not restored peer={} handle={} error={}",
                        x.peer, x.handle, base::q(pinned.error().message));
      if (store_ != nullptr) store_->export_dropped(x.token);
      continue;
    }
    Export e;
    e.token = x.token;
    e.conn_id = x.conn_id;
    e.owner_uid = owner->second->uid;
    e.owner_tenant = clients::Peer{x.conn_id, owner->second->uid, 0, owner->second->pid, false, owner->second->pod_uid}
                         .tenant();
    e.peer = x.peer;
    e.handle = x.handle;
    e.offset = x.offset;
    e.range = pinned.value();
    e.rights = x.rights;
    ++exports_by_tenant_[e.owner_tenant];
    exports_.emplace(e.token, std::move(e));  // granted again once the peer's session is ready
    ++restored;
  }
  return restored;
}

void FlowService::adopt_connection(uint64_t from, const clients::Peer& to) {
  for (auto& [token, e] : exports_)
    if (e.conn_id == from) e.conn_id = to.conn_id;
}

clients::Result<proto::ImportReply> FlowService::import_token(const clients::Peer& client, const proto::ImportRequest& req) {
  auto f = flows_.find(req.flow_id);
  if (f == flows_.end() || f->second.conn_id != client.conn_id)
    return clients::Error{RDMAD_ERR_NOT_FOUND, "no flow " + std::to_string(req.flow_id) + " on this connection"};
  const Token token = to_token(req.token);
  auto g = grants_.find(token);
  if (g == grants_.end())
    return clients::Error{RDMAD_ERR_NOT_FOUND,
                      "unknown token: not exported to this node, revoked, or its exporter was lost"};
  if (g->second->from != f->second.peer)
    return clients::Error{RDMAD_ERR_PERMISSION, "the token was exported by " + g->second->from + ", this flow goes to " +
                                                f->second.peer};
  FlowRecord& flow = f->second;
  // One remote handle per token and flow: importing again (after the peer restarted, or twice)
  // gives the same one, so imports are bounded by the tokens the peer may grant.
  uint64_t handle = 0;
  for (auto [it, end] = imports_by_token_.equal_range(token); it != end && handle == 0; ++it)
    if (imports_.at(it->second).flow_id == flow.id) handle = it->second;
  if (handle == 0) {
    if (flow.imports >= options_.max_grants_per_peer) {
      // Imports whose grants never came back (their exports ended while the peer was away) go first.
      erase_imports([&](const Import& i) { return i.flow_id == flow.id && grants_.count(i.token) == 0; });
      engine_->run_sync([&] { engine_->prune_awaiting(flow.id); });
    }
    if (flow.imports >= options_.max_grants_per_peer)
      return clients::Error{RDMAD_ERR_QUOTA, "flow " + std::to_string(flow.id) + " holds " +
                                                 std::to_string(flow.imports) + " imports (max_grants_per_peer)"};
    handle = next_remote_handle_++;
    imports_[handle] = Import{flow.id, token};
    imports_by_token_.emplace(token, handle);
    ++flow.imports;
  }
  RemoteRange range = g->second->range;
  const uint64_t flow_id = req.flow_id;
  engine_->run_sync([&] { engine_->add_import(flow_id, handle, range); });
  return proto::ImportReply{handle, range.length, range.rights, 0};
}

void FlowService::erase_imports(const std::function<bool(const Import&)>& drop) {
  for (auto it = imports_.begin(); it != imports_.end();) {
    if (!drop(it->second)) {
      ++it;
      continue;
    }
    for (auto [t, end] = imports_by_token_.equal_range(it->second.token); t != end; ++t) {
      if (t->second != it->first) continue;
      imports_by_token_.erase(t);
      break;
    }
    if (auto f = flows_.find(it->second.flow_id); f != flows_.end() && f->second.imports > 0) --f->second.imports;
    it = imports_.erase(it);
  }
}

void FlowService::reattach_imports(const std::string& peer, const Token& token) {
  std::vector<std::pair<uint64_t, uint64_t>> again;  // flow, remote handle
  for (auto [it, end] = imports_by_token_.equal_range(token); it != end; ++it) {
    const Import& i = imports_.at(it->second);
    auto f = flows_.find(i.flow_id);
    if (f != flows_.end() && f->second.peer == peer) again.emplace_back(i.flow_id, it->second);
  }
  if (again.empty()) return;
  const RemoteRange range = grants_.at(token)->range;
  engine_->run_sync([&] {
    for (const auto& [flow_id, handle] : again) engine_->add_import(flow_id, handle, range);
  });
}

clients::Result<clients::Ok> FlowService::revoke(const clients::Peer& client, const proto::RevokeRequest& req) {
  auto it = exports_.find(to_token(req.token));
  if (it == exports_.end() || it->second.conn_id != client.conn_id)
    return clients::Error{RDMAD_ERR_NOT_FOUND, "no export with this token on this connection"};
  drop_export(it, true);
  return clients::Ok{};
}

void FlowService::on_peer_message(const std::string& peer, uint16_t type, const std::vector<uint8_t>& payload) {
  switch (static_cast<peer::MessageType>(type)) {
    case peer::MessageType::kGrant: {
      auto g = peer::decode_grant(payload);
      if (!g) break;
      uint32_t& held = grants_by_peer_[peer];
      auto existing = grants_.find(g->token);
      const bool again = existing != grants_.end() && existing->second->from == peer;
      const char* refused = nullptr;
      if (existing != grants_.end() && !again) {
        refused = "its token is another peer's";  // a peer must not replace another's grant
      } else if (!again && held >= options_.max_grants_per_peer) {
        refused = "the peer holds max_grants_per_peer grants here";
      }
      if (refused != nullptr) {
        counters_.grants_refused.fetch_add(1, std::memory_order_relaxed);
        base::log_limited(*flow_log(), g_refusal_log, spdlog::level::warn, "grant refused peer={} error={}", peer,
                          base::q(refused));
        channel_->send(peer, peer::MessageType::kGrantAck,
                       peer::encode(peer::GrantAck{g->token, static_cast<uint32_t>(RDMAD_ERR_NO_RESOURCE)}));
        return;
      }
      if (!again) ++held;
      auto grant = std::make_unique<Grant>();
      grant->from = peer;
      grant->range.iova = g->iova;
      grant->range.length = g->length;
      grant->range.rights = g->rights;
      grant->range.token = g->token;
      set_remote_keys(grant->range, g->keys);
      grants_[g->token] = std::move(grant);
      set_grants_held();
      reattach_imports(peer, g->token);
      channel_->send(peer, peer::MessageType::kGrantAck, peer::encode(peer::GrantAck{g->token, 0}));
      return;
    }
    case peer::MessageType::kGrantAck: {
      auto a = peer::decode_grant_ack(payload);
      if (!a) break;
      auto it = exports_.find(a->token);
      if (it == exports_.end() || it->second.peer != peer || !it->second.done) return;
      auto done = std::move(it->second.done);
      it->second.done = nullptr;
      if (a->status != 0) {
        drop_export(it, false);
        done(clients::Error{RDMAD_ERR_REMOTE_ACCESS, "peer " + peer + " refused the export"});
        return;
      }
      if (store_ != nullptr) {
        const Export& e = it->second;
        store_->export_added({e.token, e.conn_id, e.handle, e.offset, e.range.length, e.rights, e.peer});
      }
      proto::ExportReply r{};
      std::memcpy(r.token, a->token.data(), sizeof(r.token));
      done(r);
      return;
    }
    case peer::MessageType::kRevoke: {
      auto r = peer::decode_revoke(payload);
      if (!r) break;
      auto it = grants_.find(r->token);
      if (it == grants_.end() || it->second->from != peer) return;
      grants_.erase(it);
      set_grants_held();
      if (auto h = grants_by_peer_.find(peer); h != grants_by_peer_.end() && h->second > 0) --h->second;
      erase_imports([&](const Import& i) { return i.token == r->token; });
      engine_->run_sync([&] { engine_->drop_token(r->token); });
      return;
    }
    case peer::MessageType::kRecvPost:
    case peer::MessageType::kSendDone:
    case peer::MessageType::kRecvCancel: {
      // Lane mail no lane could take: as if it came on a lane.
      auto m = peer::decode_mail_frame(static_cast<peer::MessageType>(type), payload);
      if (!m) break;
      engine_->run_sync([&] { engine_->mail(peer, std::move(*m)); });
      return;
    }
    case peer::MessageType::kRecvQuery: {
      auto m = peer::decode_recv_query(payload);
      if (!m) break;
      peer::RecvState answer;
      engine_->run_sync([&] { answer = engine_->recv_query(peer, *m); });
      channel_->send(peer, peer::MessageType::kRecvState, peer::encode(answer));
      return;
    }
    case peer::MessageType::kRecvState: {
      auto m = peer::decode_recv_state(payload);
      if (!m) break;
      engine_->run_sync([&] { engine_->recv_state(peer, *m); });
      return;
    }
    case peer::MessageType::kIdle:
      on_idle_request(peer);
      return;
    default:
      return;
  }
  channel_->disconnect(peer, "malformed flow message (type " + std::to_string(type) + ")");
}

}  // namespace rdmad::flow
