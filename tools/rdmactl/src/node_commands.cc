// rdmactl peers, gids and the daemon's own part of status: what the node is, how it is doing and
// who its neighbours are (admin requests kListPeers, kListGids, kStatus).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <ctime>

#include "admin_call.h"
#include "admin_commands.h"
#include "output.h"

namespace rdmactl {
namespace {

using rdmad::proto::MsgType;

const char* peer_state_name(uint32_t s) {
  static constexpr const char* kNames[] = {"down", "connecting", "connected", "ready"};
  return s < 4 ? kNames[s] : "unknown";
}

// PeerEntry.dialled (rdmad::proto::PeerSource): where the node knows the peer from.
const char* peer_source_name(uint32_t s) {
  static constexpr const char* kNames[] = {"accepted", "static", "dns"};
  return s < 3 ? kNames[s] : "unknown";
}

// "2026-12-03T12:51:02Z".
std::string utc_text(uint64_t unix_ms) {
  const time_t t = static_cast<time_t>(unix_ms / 1000);
  struct tm tm {};
  char buf[32] = "?";
  if (gmtime_r(&t, &tm) != nullptr) strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// "3d 4h", "2h 5m", "4m 10s", "12s".
std::string duration_text(uint64_t ms) {
  const uint64_t s = ms / 1000, m = s / 60, h = m / 60, d = h / 24;
  if (d > 0) return fmt::format("{}d {}h", d, h % 24);
  if (h > 0) return fmt::format("{}h {}m", h, m % 60);
  if (m > 0) return fmt::format("{}m {}s", m, s % 60);
  return fmt::format("{}s", s);
}

uint64_t now_unix_ms() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// The GID in the full form show_gids and sysfs print ("0000:0000:0000:0000:0000:ffff:0a00:0001").
std::string gid_text(const uint8_t (&g)[16]) {
  std::string out;
  for (int i = 0; i < 16; i += 2) out += fmt::format("{}{:02x}{:02x}", i ? ":" : "", g[i], g[i + 1]);
  return out;
}

// "a.b.c.d" for an IPv4-mapped GID (::ffff:a.b.c.d), else empty.
std::string gid_ipv4(const uint8_t (&g)[16]) {
  for (int i = 0; i < 10; ++i)
    if (g[i] != 0) return {};
  if (g[10] != 0xff || g[11] != 0xff) return {};
  return fmt::format("{}.{}.{}.{}", g[12], g[13], g[14], g[15]);
}

// "v1", "v2" (RoCE) or "IB".
std::string gid_version(const std::string& type) {
  if (type == "RoCE v1") return "v1";
  if (type == "RoCE v2") return "v2";
  return type;
}

}  // namespace

int cmd_peers(rdmad_client* c, bool json) {
  std::vector<rdmad::proto::PeerEntry> peers;
  int rc = kExitOk;
  if (!list_all(
          c, MsgType::kListPeers, rdmad::proto::kMaxPeerListEntries, "list peers",
          [](const auto& v) { return v.size(); }, &peers, &rc))
    return rc;
  const uint64_t now = now_unix_ms();
  if (json) {
    std::string out;
    for (const auto& p : peers) {
      out += fmt::format(
          "{}{{\"node_id\":\"{}\",\"address\":\"{}\",\"state\":\"{}\",\"dialled\":{},\"source\":\"{}\","
          "\"rails_up\":{},\"rails\":{},"
          "\"rtt_us\":{},\"since\":\"{}\",\"since_unix_ms\":{},\"last_error\":\"{}\"}}",
          out.empty() ? "" : ",", json_escape(field(p.node_id)), json_escape(field(p.address)),
          peer_state_name(p.state), p.dialled == 1, peer_source_name(p.dialled), p.rails_up, p.rails,
          p.rtt_us == 0 ? std::string("null") : std::to_string(p.rtt_us), utc_text(p.since_unix_ms),
          p.since_unix_ms, json_escape(field(p.last_error)));
    }
    std::printf("[%s]\n", out.c_str());
    return kExitOk;
  }
  std::printf("%-20s %-22s %-10s %-9s %5s %9s  %-28s %s\n", "NODE", "ADDRESS", "STATE", "SOURCE", "RAILS", "RTT",
              "SINCE", "LAST ERROR");
  for (const auto& p : peers) {
    const std::string rtt = p.rtt_us == 0 ? "-" : fmt::format("{:.2f} ms", static_cast<double>(p.rtt_us) / 1000.0);
    const std::string since = fmt::format("{} ({} ago)", utc_text(p.since_unix_ms),
                                          duration_text(now > p.since_unix_ms ? now - p.since_unix_ms : 0));
    const std::string error = field(p.last_error);
    // A discovered address no connection has identified yet has no node id.
    const std::string node = field(p.node_id);
    std::printf("%-20s %-22s %-10s %-9s %5s %9s  %-28s %s\n", node.empty() ? "?" : node.c_str(), field(p.address).c_str(),
                peer_state_name(p.state), peer_source_name(p.dialled),
                fmt::format("{}/{}", p.rails_up, p.rails).c_str(), rtt.c_str(), since.c_str(),
                error.empty() ? "-" : error.c_str());
  }
  if (peers.empty())
    std::printf("(no peers: [peer] is off, or no [[peers]] configured, nothing discovered and none connected)\n");
  return kExitOk;
}

int cmd_gids(rdmad_client* c, bool json) {
  std::vector<rdmad::proto::GidEntry> gids;
  int rc = kExitOk;
  if (!list_all(
          c, MsgType::kListGids, rdmad::proto::kMaxGidListEntries, "list gids",
          [](const auto& v) { return v.size(); }, &gids, &rc))
    return rc;
  if (json) {
    std::string out;
    for (const auto& g : gids) {
      const std::string ipv4 = gid_ipv4(g.gid), type = field(g.type), version = gid_version(type);
      out += fmt::format(
          "{}{{\"device\":\"{}\",\"port\":{},\"index\":{},\"gid\":\"{}\",\"ipv4\":{},\"type\":\"{}\","
          "\"roce_version\":{},\"netdev\":\"{}\",\"nic\":\"{}\"}}",
          out.empty() ? "" : ",", json_escape(field(g.device)), g.port, g.index, gid_text(g.gid),
          ipv4.empty() ? std::string("null") : "\"" + ipv4 + "\"", json_escape(type),
          version == "v1" ? "1" : version == "v2" ? "2" : "null", json_escape(field(g.netdev)),
          json_escape(field(g.nic)));
    }
    std::printf("[%s]\n", out.c_str());
    return kExitOk;
  }
  // The columns of rdma-core's show_gids, then the [[nic]] on the port.
  std::printf("%-16s %-4s %-5s %-39s %-15s %-3s %-15s %s\n", "DEV", "PORT", "INDEX", "GID", "IPv4", "VER", "DEV",
              "NIC");
  for (const auto& g : gids) {
    const std::string ipv4 = gid_ipv4(g.gid), netdev = field(g.netdev), nic = field(g.nic);
    std::printf("%-16s %-4u %-5u %-39s %-15s %-3s %-15s %s\n", field(g.device).c_str(), g.port, g.index,
                gid_text(g.gid).c_str(), ipv4.c_str(), gid_version(field(g.type)).c_str(),
                netdev.empty() ? "-" : netdev.c_str(), nic.empty() ? "-" : nic.c_str());
  }
  if (gids.empty()) std::printf("(no GIDs: no NIC in service and no RDMA device found)\n");
  return kExitOk;
}

int daemon_status(rdmad_client* c, DaemonStatus* out) {
  std::vector<std::byte> reply;
  if (auto st = rdmad::admin::call(c, MsgType::kStatus, {}, &reply); st != RDMAD_OK) {
    if (st == RDMAD_ERR_PERMISSION) return -1;
    if (st == RDMAD_ERR_PROTOCOL) return -2;  // a daemon older than kStatus: "unknown request type"
    return fail(c, "status", st);
  }
  if (reply.size() != sizeof(rdmad::proto::StatusReply)) {
    std::fprintf(stderr, "rdmactl: malformed reply from the daemon\n");
    return kExitDaemonError;
  }
  const auto r = load<rdmad::proto::StatusReply>(reply, 0);
  static constexpr const char* kHealth[] = {"ok", "degraded", "failing"};
  out->health = r.health < 3 ? kHealth[r.health] : "unknown";
  out->reasons = field(r.reasons);
  out->json = fmt::format(
      "\"version\":\"{}\",\"commit\":\"{}\",\"node_id\":\"{}\",\"config_path\":{},\"start_time\":\"{}\","
      "\"start_time_unix_ms\":{},\"uptime_seconds\":{:.3f},\"health\":\"{}\",\"health_reasons\":[{}],"
      "\"nics_up\":{},\"peer_enabled\":{},\"peers\":{},\"peers_ready\":{},\"reloads_ok\":{},\"reloads_failed\":{},"
      "\"last_reload_error\":{}",
      json_escape(field(r.version)), json_escape(field(r.commit)), json_escape(field(r.node_id)),
      r.config_path[0] ? "\"" + json_escape(field(r.config_path)) + "\"" : std::string("null"),
      utc_text(r.start_time_unix_ms), r.start_time_unix_ms, static_cast<double>(r.uptime_ms) / 1000.0, out->health,
      [&] {
        std::string list;
        const std::string all = field(r.reasons);
        for (size_t start = 0; start < all.size();) {
          size_t end = all.find("; ", start);
          if (end == std::string::npos) end = all.size();
          list += (list.empty() ? "\"" : ",\"") + json_escape(all.substr(start, end - start)) + "\"";
          start = end + 2;
        }
        return list;
      }(),
      r.nics_up, r.peer_enabled != 0, r.peers, r.peers_ready, r.reloads_ok, r.reloads_failed,
      r.last_reload_error[0] ? "\"" + json_escape(field(r.last_reload_error)) + "\"" : std::string("null"));
  out->text = fmt::format("version:  {} (commit {})\nnode:     {}\nconfig:   {}\nuptime:   {} (since {})\n",
                          field(r.version), field(r.commit), field(r.node_id),
                          r.config_path[0] ? field(r.config_path) : std::string("(embedded default)"),
                          duration_text(r.uptime_ms), utc_text(r.start_time_unix_ms));
  out->text += fmt::format("health:   {}{}\n", out->health, out->reasons.empty() ? "" : ": " + out->reasons);
  out->nics_up = r.nics_up;
  if (r.peer_enabled) out->peers_line = fmt::format("peers:    {} known, {} ready\n", r.peers, r.peers_ready);
  out->text_tail = fmt::format("reloads:  {} ok, {} failed{}\n", r.reloads_ok, r.reloads_failed,
                               r.last_reload_error[0] ? "; last: " + field(r.last_reload_error) : "");
  return kExitOk;
}

}  // namespace rdmactl
