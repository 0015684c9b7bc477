#pragma once
// The daemon's health verdict for operators (rdmactl status): a pure function of what the daemon
// knows about its NICs, peers and last reload, so that the rules are tested on their own.
//   failing:  no NIC is in service with its link up (no registration or flow can work);
//   degraded: a NIC is out of service or its link is down, a configured peer's queue pairs are
//             not ready, or the last reload failed (the daemon runs on the previous file);
//   ok:       none of these.
#include <cstdint>
#include <string>
#include <vector>

namespace rdmad::daemon {

// In the order of the protocol's StatusReply.health.
enum class Health : uint8_t { kOk = 0, kDegraded = 1, kFailing = 2 };

struct HealthInput {
  struct NicState {
    std::string name;
    bool in_service = false;
    bool link_up = false;
    std::string out_of_service;  // why it is not in service
  };
  struct PeerState {
    std::string node_id;
    std::string state = "down";  // "down", "connecting", "connected" (queue pairs not ready) or "ready"
    bool dialled = false;        // a configured peer ([[peers]])
    std::string last_error;
  };
  std::vector<NicState> nics;
  std::vector<PeerState> peers;
  bool last_reload_failed = false;
};

struct HealthVerdict {
  Health health = Health::kOk;
  std::vector<std::string> reasons;  // one finding each, most serious first
};

HealthVerdict judge_health(const HealthInput& in);

// Readiness, the kubelet's /readyz (docs/operations.md, "Probes"): can this node serve flows now?
//   not ready: no NIC is in service with its link up; or peers are known (configured or discovered)
//              and none is reachable (connected or ready) while at least one was tried and is not
//              (a discovered peer whose session is still unopened, with no error, is no evidence
//              either way: sessions open on a node's first flow);
//   ready:     otherwise, with every judge_health finding as a note. No peer at all is ready (the
//              first node of a cluster, a node without flows).
struct Readiness {
  bool ready = true;
  std::vector<std::string> reasons;  // why not, or (when ready) the health findings
};

Readiness judge_readiness(const HealthInput& in);

// "ok", "degraded" or "failing".
const char* to_string(Health h);

}  // namespace rdmad::daemon
