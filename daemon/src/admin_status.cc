// AdminService: what the daemon tells operators about itself and its neighbours — its peers, the
// GID tables of its ports and its status with a health verdict (rdmactl peers, gids, status).
#include <fmt/format.h>

#include "rdmad/daemon/admin_service.h"
#include "rdmad/daemon/health.h"
#include "rdmad/version.h"

namespace rdmad::daemon {
namespace {

static_assert(static_cast<uint32_t>(Health::kDegraded) == static_cast<uint32_t>(proto::Health::kDegraded) &&
              static_cast<uint32_t>(Health::kFailing) == static_cast<uint32_t>(proto::Health::kFailing));
static_assert(static_cast<uint32_t>(proto::PeerState::kReady) == 3);

uint64_t unix_ms(std::chrono::system_clock::time_point t) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count());
}

// Every peer the channel knows (the pages of list_peers joined).
std::vector<proto::PeerEntry> all_peers(flow::FlowService* flows) {
  std::vector<proto::PeerEntry> out;
  if (flows == nullptr) return out;
  for (bool more = true; more;) {
    auto page = flows->list_peers(out.size(), proto::kMaxPeerListEntries, &more);
    out.insert(out.end(), page.begin(), page.end());
  }
  return out;
}

}  // namespace

std::vector<proto::PeerEntry> AdminService::list_peers(uint64_t skip, uint32_t max_entries, bool* more) {
  *more = false;
  return flows_ != nullptr ? flows_->list_peers(skip, max_entries, more) : std::vector<proto::PeerEntry>{};
}

std::vector<proto::GidEntry> AdminService::list_gids(uint64_t skip, uint32_t max_entries, bool* more) {
  std::vector<proto::GidEntry> all;
  // Hardware ports: their tables as the kernel has them now, named by the [[nic]] on them if any.
  for (const verbs::HostNic& p : nics_.hardware().gid_tables()) {
    const config::NicSection* named = nullptr;
    for (const auto& n : config_.nics) {
      const verbs::BackendInfo* b = nics_.slots().backends().find(n.backend);
      if (b != nullptr && b->caps.sysfs_ports && n.device == p.device && static_cast<unsigned>(n.port) == p.port)
        named = &n;
    }
    for (const verbs::HostGid& g : p.gids) {
      proto::GidEntry e{};
      proto::copy_cstr(e.nic, named != nullptr ? named->name.c_str() : "");
      proto::copy_cstr(e.device, p.device.c_str());
      proto::copy_cstr(e.netdev, g.netdev.c_str());
      proto::copy_cstr(e.type, g.type.c_str());
      std::copy(g.gid.begin(), g.gid.end(), e.gid);
      e.port = p.port;
      e.index = g.index;
      all.push_back(e);
    }
  }
  // NICs whose ports are not the kernel's (soft): one GID, the address the NIC is bound to.
  for (const Nic& n : nics_.slots().nics()) {
    if (!n.in_service() || (n.backend != nullptr && n.backend->caps.sysfs_ports)) continue;
    auto port = n.device->query_port(n.port());
    if (!port.ok()) continue;
    proto::GidEntry e{};
    proto::copy_cstr(e.nic, n.config.name.c_str());
    proto::copy_cstr(e.device, n.device->info().name.c_str());
    proto::copy_cstr(e.type, port.value().link_layer == verbs::LinkLayer::kEthernet ? "RoCE v2" : "IB");
    std::copy(port.value().gid.raw.begin(), port.value().gid.raw.end(), e.gid);
    e.port = n.port();
    all.push_back(e);
  }
  std::vector<proto::GidEntry> out;
  for (size_t i = skip; i < all.size() && out.size() < max_entries; ++i) out.push_back(all[i]);
  *more = skip + out.size() < all.size();
  return out;
}

HealthInput AdminService::health_input() {
  HealthInput in;
  for (const Nic& n : nics_.slots().nics()) {
    HealthInput::NicState s{n.config.name, n.in_service(), false, n.out_of_service};
    if (n.in_service()) {
      auto port = n.device->query_port(n.port());
      s.link_up = port.ok() && port.value().state == verbs::PortState::kActive;
    }
    in.nics.push_back(std::move(s));
  }
  static constexpr const char* kStates[] = {"down", "connecting", "connected", "ready"};
  // Only [[peers]] are expected up: a discovered node is connected when a flow needs it.
  for (const proto::PeerEntry& p : all_peers(flows_))
    in.peers.push_back({p.node_id, p.state < 4 ? kStates[p.state] : "down",
                        p.dialled == static_cast<uint32_t>(proto::PeerSource::kStatic), p.last_error});
  in.last_reload_failed = !reloads_.last_error.empty();
  return in;
}

proto::StatusReply AdminService::status() {
  proto::StatusReply r{};
  proto::copy_cstr(r.version, kVersion);
  proto::copy_cstr(r.commit, kCommit);
  proto::copy_cstr(r.node_id, facts_.node_id.c_str());
  proto::copy_cstr(r.config_path, facts_.config_path.c_str());
  r.start_time_unix_ms = unix_ms(facts_.started);
  r.uptime_ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::steady_clock::now() - facts_.started_steady)
                                          .count());
  r.reloads_ok = reloads_.ok;
  r.reloads_failed = reloads_.failed;
  proto::copy_cstr(r.last_reload_error, reloads_.last_error.c_str());
  r.peer_enabled = config_.peer.enabled ? 1 : 0;

  const HealthInput in = health_input();
  for (const auto& n : in.nics) r.nics_up += n.in_service && n.link_up ? 1 : 0;
  r.nics = static_cast<uint32_t>(in.nics.size());
  for (const auto& p : in.peers) r.peers_ready += p.state == "ready" ? 1 : 0;
  r.peers = static_cast<uint32_t>(in.peers.size());
  const HealthVerdict v = judge_health(in);
  r.health = static_cast<uint32_t>(v.health);
  std::string reasons;
  for (const auto& why : v.reasons) reasons += (reasons.empty() ? "" : "; ") + why;
  proto::copy_cstr(r.reasons, reasons.c_str());
  return r;
}

}  // namespace rdmad::daemon
