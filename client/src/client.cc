// Connection management and the query operations of the C API.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <thread>

#include "client_impl.h"

namespace rdmad::client {
namespace {

void mark_lost(rdmad_client* client, rdmad_mr* mr) {
  mr->lost = true;
  if (client->lost_fn != nullptr) client->lost_fn(client->lost_user, mr, mr->handle);
}

void mark_all_lost(rdmad_client* client) {
  auto cache = std::move(client->cache);
  client->cache.clear();
  for (auto& [key, mr] : cache) mark_lost(client, mr);
}

// The daemon's handles of this connection's session, or nullopt when it cannot tell.
std::optional<std::set<uint64_t>> session_handles(rdmad_client* client) {
  std::set<uint64_t> out;
  proto::ListRequest req{0, proto::kMaxListEntries, 0};
  for (;;) {
    Reply r = client->channel.transact(proto::MsgType::kListRegistrations, as_bytes_of(req), -1);
    proto::ListReply head;
    if (r.status != RDMAD_OK || r.body.size() < sizeof(head)) return std::nullopt;
    std::memcpy(&head, r.body.data(), sizeof(head));
    if (head.count > proto::kMaxListEntries || r.body.size() != sizeof(head) + head.count * sizeof(proto::ListEntry))
      return std::nullopt;
    for (uint32_t i = 0; i < head.count; ++i) {
      proto::ListEntry e;
      std::memcpy(&e, r.body.data() + sizeof(head) + i * sizeof(e), sizeof(e));
      out.insert(e.handle);
      req.after_handle = e.handle;
    }
    if (head.more == 0 || head.count == 0) return out;
  }
}

// The daemon restarted: asks the new one for this client's session of the previous run. Resumed,
// every registration keeps its rdmad_mr and handle (its keys are read again: a NIC gives new ones);
// one the daemon does not hold is lost, and a handle the client never learned of (its
// registration was in flight at the restart) is released. Not resumed (no keeper of the memory,
// the grace ran out, another daemon): every registration is lost, as before.
void after_restart(rdmad_client* client, const Channel::Session& old) {
  const bool had_session = old != Channel::Session{};
  proto::ResumeRequest req{};
  std::memcpy(req.session, old.data(), sizeof(req.session));
  bool resumed = false;
  if (had_session && client->channel.has_session()) {
    Reply r = client->channel.transact(proto::MsgType::kResume, as_bytes_of(req), -1);
    proto::ResumeReply rr{};
    if (r.status == RDMAD_OK && r.body.size() == sizeof(rr)) std::memcpy(&rr, r.body.data(), sizeof(rr));
    resumed = rr.resumed == 1;
  }
  auto live = resumed ? session_handles(client) : std::nullopt;
  if (!live) {
    mark_all_lost(client);
    return;
  }
  client->channel.set_session(old);
  std::set<uint64_t> known;
  for (auto it = client->cache.begin(); it != client->cache.end();) {
    rdmad_mr* mr = it->second;
    proto::QueryRegistrationRequest q{mr->handle};
    Reply r = live->count(mr->handle) != 0
                  ? client->channel.transact(proto::MsgType::kQueryRegistration, as_bytes_of(q), -1)
                  : Reply{RDMAD_ERR_NOT_FOUND, "not held", {}, {}};
    proto::RegisterReply reply{};
    if (r.status == RDMAD_OK && r.body.size() == sizeof(reply)) {
      std::memcpy(&reply, r.body.data(), sizeof(reply));
      mr->iova = reply.iova;
      mr->keys.clear();
      for (uint32_t i = 0; i < reply.nic_count && i < proto::kMaxNics; ++i)
        mr->keys.push_back({reply.keys[i].nic_index, reply.keys[i].lkey, reply.keys[i].rkey});
      known.insert(mr->handle);
      ++it;
      continue;
    }
    mark_lost(client, mr);
    it = client->cache.erase(it);
  }
  for (uint64_t handle : *live) {
    if (known.count(handle) != 0) continue;
    proto::DeregisterRequest d{handle};
    client->channel.transact(proto::MsgType::kDeregister, as_bytes_of(d), -1);
  }
}

// A new connection after the old one dropped: the same daemon released everything of the old
// connection; a restarted one may give the session back.
void after_reconnect(rdmad_client* client, uint64_t old_instance, const Channel::Session& old) {
  if (client->channel.instance_id() == old_instance)
    mark_all_lost(client);
  else
    after_restart(client, old);
}

bool reconnect(rdmad_client* client) {
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + std::chrono::milliseconds(client->reconnect_timeout_ms);
  std::string error;
  for (;;) {
    // Each attempt is bounded too: a listener that never answers must not outlast the deadline.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    const auto attempt = static_cast<uint32_t>(std::clamp<long>(left, 1, client->connect_timeout_ms));
    if (client->channel.open(client->path, &error, attempt) == RDMAD_OK) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the daemon is restarting
  }
}

constexpr uint32_t kInFlightProbeMs = 500;

// The connection dropped with a request in flight. One attempt to reach the daemon again tells
// which case it is: nobody there (stopped or dead), another instance (restarted: it never heard of
// this connection's state), or the same one, which closed only this connection; only when that
// one closed with the request unread is sending it again safe.
Reply in_flight_lost(rdmad_client* client, Reply lost, proto::MsgType type, std::span<const std::byte> body,
                     int fd) {
  const uint64_t instance = client->channel.instance_id();
  const Channel::Session session = client->channel.session();
  std::string error;
  Reply gone{RDMAD_ERR_DAEMON_GONE,
             "the daemon closed the connection before answering (it stopped or died): " + lost.error,
             {},
             {}};
  // A live daemon answers hello in milliseconds; a listener that does not (systemd holding the
  // socket of a daemon that is restarting) must not hold the caller for the whole connect timeout.
  const uint32_t probe_ms = std::min<uint32_t>(client->connect_timeout_ms, kInFlightProbeMs);
  if (client->channel.open(client->path, &error, probe_ms) != RDMAD_OK) return gone;
  after_reconnect(client, instance, session);
  if (client->channel.instance_id() != instance) {
    gone.error = "the daemon restarted with this request in flight";
    return gone;
  }
  if (!lost.unread)  // it read the request and closed: it may have acted on it, so it is not repeated
    return Reply{RDMAD_ERR_CONNECTION, "the daemon closed this connection before answering", {}, {}};
  return client->channel.transact(type, body, fd);
}

rdmad_status nic_list(rdmad_client* client, const Reply& r, rdmad_nic_info* out, size_t capacity,
                      size_t* count) {
  proto::NicListReply head;
  if (r.body.size() < sizeof(head)) return fail(client, RDMAD_ERR_PROTOCOL, "short NIC list reply");
  std::memcpy(&head, r.body.data(), sizeof(head));
  if (head.count > proto::kMaxNics || r.body.size() != sizeof(head) + head.count * sizeof(proto::NicEntry))
    return fail(client, RDMAD_ERR_PROTOCOL, "NIC list reply has the wrong size");
  *count = head.count;
  for (size_t i = 0; i < head.count && i < capacity; ++i) {
    proto::NicEntry e;
    std::memcpy(&e, r.body.data() + sizeof(head) + i * sizeof(e), sizeof(e));
    rdmad_nic_info& o = out[i];
    o.index = e.index;
    proto::copy_cstr(o.name, std::string(e.name, strnlen(e.name, sizeof(e.name))).c_str());
    proto::copy_cstr(o.backend, std::string(e.backend, strnlen(e.backend, sizeof(e.backend))).c_str());
    proto::copy_cstr(o.pci_address,
                     std::string(e.pci_address, strnlen(e.pci_address, sizeof(e.pci_address))).c_str());
    o.link_state =
        e.link_state <= RDMAD_LINK_UP ? static_cast<rdmad_link_state>(e.link_state) : RDMAD_LINK_UNKNOWN;
    o.speed_mbps = e.speed_mbps;
    o.numa_node = e.numa_node;
  }
  return RDMAD_OK;
}

}  // namespace

rdmad_status fail(rdmad_client* client, rdmad_status status, std::string message) {
  if (client != nullptr) client->last_error = std::move(message);
  return status;
}

Reply call(rdmad_client* client, proto::MsgType type, std::span<const std::byte> body, int fd) {
  const uint64_t instance = client->channel.instance_id();
  const Channel::Session session = client->channel.session();
  Reply r = client->channel.transact(type, body, fd);
  if (r.status != RDMAD_ERR_CONNECTION) return r;
  if (r.sent && instance != 0) return in_flight_lost(client, std::move(r), type, body, fd);
  if (client->reconnect_timeout_ms == 0) return r;
  if (!reconnect(client)) return r;
  after_reconnect(client, instance, session);
  return client->channel.transact(type, body, fd);
}

}  // namespace rdmad::client

using rdmad::client::fail;
using rdmad::proto::MsgType;

namespace {
thread_local std::string t_connect_error;  // rdmad_connect has no client to hold its message
}

extern "C" {

const char* rdmad_strerror(rdmad_status status) {
  switch (status) {
    case RDMAD_OK:
      return "success";
    case RDMAD_ERR_INVALID_ARGUMENT:
      return "invalid argument";
    case RDMAD_ERR_PERMISSION:
      return "permission denied";
    case RDMAD_ERR_QUOTA:
      return "quota exceeded";
    case RDMAD_ERR_NOT_SUPPORTED:
      return "not supported";
    case RDMAD_ERR_NOT_FOUND:
      return "not found";
    case RDMAD_ERR_PROTOCOL:
      return "protocol error";
    case RDMAD_ERR_CONNECTION:
      return "connection to the daemon failed";
    case RDMAD_ERR_VERSION:
      return "no common protocol version";
    case RDMAD_ERR_NO_RESOURCE:
      return "out of resources";
    case RDMAD_ERR_SYSTEM:
      return "system call failed";
    case RDMAD_ERR_CUDA:
      return "CUDA driver error";
    case RDMAD_ERR_LOST:
      return "registration lost in a daemon restart";
    case RDMAD_ERR_PEER:
      return "peer node not connected or lost";
    case RDMAD_ERR_REMOTE_ACCESS:
      return "remote access refused";
    case RDMAD_ERR_DAEMON_GONE:
      return "the daemon stopped or died with the request in flight";
    case RDMAD_ERR_ADMIN_SOCKET:
      return "admin requests go to the admin socket";
  }
  return "unknown status";
}

rdmad_status rdmad_connect(const char* socket_path, rdmad_client** out) {
  // $RDMAD_CONNECT_TIMEOUT_MS (1..600000) for the operator of a node whose daemon starts slowly
  // (socket activation on a loaded node); anything else in it is ignored.
  uint32_t timeout_ms = RDMAD_DEFAULT_CONNECT_TIMEOUT_MS;
  if (const char* env = std::getenv("RDMAD_CONNECT_TIMEOUT_MS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const unsigned long v = std::strtoul(env, &end, 10);
    if (*end == '\0' && v >= 1 && v <= 600000) timeout_ms = static_cast<uint32_t>(v);
  }
  return rdmad_connect_timeout(socket_path, timeout_ms, out);
}

rdmad_status rdmad_connect_timeout(const char* socket_path, uint32_t timeout_ms, rdmad_client** out) {
  if (out == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  *out = nullptr;
  auto* client = new rdmad_client;
  const char* env = std::getenv("RDMAD_SOCKET");
  client->path = socket_path != nullptr ? socket_path : (env != nullptr ? env : "/run/rdmad/rdmad.sock");
  client->connect_timeout_ms = std::max<uint32_t>(timeout_ms, 1);
  std::string error;
  rdmad_status s = client->channel.open(client->path, &error, client->connect_timeout_ms);
  if (s != RDMAD_OK) {
    t_connect_error = error;
    delete client;
    return s;
  }
  *out = client;
  return RDMAD_OK;
}

void rdmad_disconnect(rdmad_client* client) {
  if (client == nullptr) return;
  client->channel.close();  // the daemon releases everything this connection registered
  for (auto& [key, mr] : client->cache) delete mr;
  delete client;
}

const char* rdmad_last_error(const rdmad_client* client) {
  return client != nullptr ? client->last_error.c_str() : t_connect_error.c_str();
}

uint16_t rdmad_protocol_version(const rdmad_client* client) { return client->channel.version(); }

void rdmad_set_lost_callback(rdmad_client* client, rdmad_lost_fn fn, void* user) {
  std::lock_guard lock(client->mu);
  client->lost_fn = fn;
  client->lost_user = user;
}

void rdmad_set_reconnect_timeout_ms(rdmad_client* client, uint32_t timeout_ms) {
  std::lock_guard lock(client->mu);
  client->reconnect_timeout_ms = timeout_ms;
}

rdmad_status rdmad_query_nics(rdmad_client* client, rdmad_nic_info* out, size_t capacity, size_t* count) {
  if (client == nullptr || count == nullptr || (out == nullptr && capacity > 0))
    return RDMAD_ERR_INVALID_ARGUMENT;
  std::lock_guard lock(client->mu);
  auto r = rdmad::client::call(client, MsgType::kQueryNics, {}, -1);
  if (r.status != RDMAD_OK) return fail(client, r.status, r.error);
  return rdmad::client::nic_list(client, r, out, capacity, count);
}

rdmad_status rdmad_nearest_nics(rdmad_client* client, const rdmad_location* where, rdmad_nic_info* out,
                                size_t capacity, size_t* count) {
  if (client == nullptr || where == nullptr || count == nullptr || (out == nullptr && capacity > 0))
    return RDMAD_ERR_INVALID_ARGUMENT;
  std::lock_guard lock(client->mu);
  rdmad::proto::NearestNicsRequest req{};
  req.kind = where->kind;
  req.numa_node = where->numa_node;
  rdmad::proto::copy_cstr(
      req.pci_address,
      std::string(where->pci_address, strnlen(where->pci_address, sizeof(where->pci_address))).c_str());
  auto r = rdmad::client::call(client, MsgType::kNearestNics, rdmad::client::as_bytes_of(req), -1);
  if (r.status != RDMAD_OK) return fail(client, r.status, r.error);
  return rdmad::client::nic_list(client, r, out, capacity, count);
}

rdmad_status rdmad_list_registrations(rdmad_client* client, rdmad_registration_info* out, size_t capacity,
                                      size_t* count) {
  if (client == nullptr || count == nullptr || (out == nullptr && capacity > 0))
    return RDMAD_ERR_INVALID_ARGUMENT;
  std::lock_guard lock(client->mu);
  *count = 0;
  rdmad::proto::ListRequest req{0, rdmad::proto::kMaxListEntries, 0};
  for (;;) {
    auto r = rdmad::client::call(client, MsgType::kListRegistrations, rdmad::client::as_bytes_of(req), -1);
    if (r.status != RDMAD_OK) return fail(client, r.status, r.error);
    rdmad::proto::ListReply head;
    if (r.body.size() < sizeof(head)) return fail(client, RDMAD_ERR_PROTOCOL, "short list reply");
    std::memcpy(&head, r.body.data(), sizeof(head));
    if (head.count > rdmad::proto::kMaxListEntries ||
        r.body.size() != sizeof(head) + head.count * sizeof(rdmad::proto::ListEntry))
      return fail(client, RDMAD_ERR_PROTOCOL, "list reply has the wrong size");
    for (uint32_t i = 0; i < head.count; ++i, ++*count) {
      rdmad::proto::ListEntry e;
      std::memcpy(&e, r.body.data() + sizeof(head) + i * sizeof(e), sizeof(e));
      if (*count < capacity)
        out[*count] = {e.handle, e.offset, e.length, static_cast<rdmad_mem_kind>(e.kind), e.access};
      req.after_handle = e.handle;
    }
    if (head.more == 0 || head.count == 0) return RDMAD_OK;
  }
}

rdmad_status rdmad_diagnose(rdmad_client* client, char* out, size_t capacity) {
  if (client == nullptr || out == nullptr || capacity == 0) return RDMAD_ERR_INVALID_ARGUMENT;
  std::lock_guard lock(client->mu);
  auto r = rdmad::client::call(client, MsgType::kDiagnose, {}, -1);
  if (r.status != RDMAD_OK) return fail(client, r.status, r.error);
  size_t n = std::min(r.body.size(), capacity - 1);
  std::memcpy(out, r.body.data(), n);
  out[n] = '\0';
  return RDMAD_OK;
}

rdmad_status rdmad_node_id(rdmad_client* client, char out[RDMAD_NODE_ID_BYTES]) {
  if (client == nullptr || out == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  std::lock_guard lock(client->mu);
  auto r = rdmad::client::call(client, MsgType::kNodeId, {}, -1);
  if (r.status != RDMAD_OK) return fail(client, r.status, r.error);
  rdmad::proto::NodeIdReply reply;
  if (r.body.size() != sizeof(reply)) return fail(client, RDMAD_ERR_PROTOCOL, "node id reply has the wrong size");
  std::memcpy(&reply, r.body.data(), sizeof(reply));
  if (!rdmad::proto::is_terminated(reply.node_id) || reply.node_id[0] == '\0')
    return fail(client, RDMAD_ERR_PROTOCOL, "node id reply is not a NUL-terminated id");
  std::memcpy(out, reply.node_id, sizeof(reply.node_id));
  return RDMAD_OK;
}

}  // extern "C"
