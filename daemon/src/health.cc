#include "rdmad/daemon/health.h"

#include <fmt/format.h>

namespace rdmad::daemon {

const char* to_string(proto::Health h) {
  switch (h) {
    case proto::Health::kOk: return "ok";
    case proto::Health::kDegraded: return "degraded";
    case proto::Health::kFailing: return "failing";
  }
  return "unknown";
}

HealthVerdict judge_health(const HealthInput& in) {
  HealthVerdict v;
  std::vector<std::string> nic_findings;
  size_t up = 0;
  for (const auto& n : in.nics) {
    if (n.in_service && n.link_up) {
      ++up;
    } else if (!n.in_service) {
      nic_findings.push_back(fmt::format("nic {} out of service: {}", n.name, n.out_of_service));
    } else {
      nic_findings.push_back(fmt::format("nic {} link down", n.name));
    }
  }
  if (up == 0) {
    v.health = proto::Health::kFailing;
    v.reasons.push_back(in.nics.empty() ? "no NIC up: none configured" : "no NIC up");
  } else if (!nic_findings.empty()) {
    v.health = proto::Health::kDegraded;
  }
  v.reasons.insert(v.reasons.end(), nic_findings.begin(), nic_findings.end());
  for (const auto& p : in.peers) {
    if (!p.dialled || p.state == proto::PeerState::kReady) continue;
    const char* what = p.state == proto::PeerState::kConnected    ? "connected, queue pairs not ready"
                       : p.state == proto::PeerState::kConnecting ? "connecting"
                                                                  : "down";
    v.reasons.push_back(p.last_error.empty() ? fmt::format("peer {} {}", p.node_id, what)
                                             : fmt::format("peer {} {}: {}", p.node_id, what, p.last_error));
    if (v.health == proto::Health::kOk) v.health = proto::Health::kDegraded;
  }
  if (in.last_reload_failed) {
    v.reasons.push_back("last reload failed: running on the previous configuration");
    if (v.health == proto::Health::kOk) v.health = proto::Health::kDegraded;
  }
  return v;
}

}  // namespace rdmad::daemon
