#include "rdmad/daemon/health.h"

#include <fmt/format.h>

namespace rdmad::daemon {

const char* to_string(Health h) {
  switch (h) {
    case Health::kOk: return "ok";
    case Health::kDegraded: return "degraded";
    case Health::kFailing: return "failing";
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
    v.health = Health::kFailing;
    v.reasons.push_back(in.nics.empty() ? "no NIC up: none configured" : "no NIC up");
  } else if (!nic_findings.empty()) {
    v.health = Health::kDegraded;
  }
  v.reasons.insert(v.reasons.end(), nic_findings.begin(), nic_findings.end());
  for (const auto& p : in.peers) {
    if (!p.dialled || p.state == "ready") continue;
    const std::string what = p.state == "connected" ? "connected, queue pairs not ready" : p.state;
    v.reasons.push_back(p.last_error.empty() ? fmt::format("peer {} {}", p.node_id, what)
                                             : fmt::format("peer {} {}: {}", p.node_id, what, p.last_error));
    if (v.health == Health::kOk) v.health = Health::kDegraded;
  }
  if (in.last_reload_failed) {
    v.reasons.push_back("last reload failed: running on the previous configuration");
    if (v.health == Health::kOk) v.health = Health::kDegraded;
  }
  return v;
}

Readiness judge_readiness(const HealthInput& in) {
  Readiness r;
  HealthVerdict v = judge_health(in);
  if (v.health == Health::kFailing) {
    r.ready = false;
    r.reasons = std::move(v.reasons);
    return r;
  }
  size_t reachable = 0, tried = 0;
  for (const auto& p : in.peers) {
    // A discovered peer whose session was closed as idle (by either side: "idle: ...") worked: no
    // evidence either way, as one never contacted.
    const bool idle_closed = !p.dialled && p.state == "down" && p.last_error.starts_with("idle:");
    if (p.state == "connected" || p.state == "ready") ++reachable;
    else if (!idle_closed && (p.dialled || p.state != "down" || !p.last_error.empty())) ++tried;
  }
  if (reachable == 0 && tried > 0) {
    r.ready = false;
    r.reasons.push_back(fmt::format("no peer reachable: {} known, {} tried", in.peers.size(), tried));
  }
  r.reasons.insert(r.reasons.end(), v.reasons.begin(), v.reasons.end());
  return r;
}

}  // namespace rdmad::daemon
