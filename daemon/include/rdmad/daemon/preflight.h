#pragma once
// rdmad --check-config: every check start-up makes that can run without starting the daemon.
//  - the file as the daemon would read it (config::load_file, with RDMAD_LOG_LEVEL applied), as the
//    service's user when run as root: a child process takes that user's uid, gid and groups and
//    reads the file and every credential it names, so a root-only key that User=rdmad could not
//    open fails here as it would at start;
//  - the NICs: a hardware NIC's device must be one the backend discovers (else the daemon keeps it
//    out of service), a soft NIC's address one of this host's (else start-up fails), and without
//    [[nic]] what the embedded default would run;
//  - the peer channel: its listen address must be local, the peers must not list this node, and
//    with the channel on, some NIC must be in service to carry flows.
// What cannot be checked here (another user's view without root, a systemd credential outside the
// service) is named, not passed over.
#include <string>
#include <vector>

#include "rdmad/verbs/registry.h"

namespace rdmad::daemon {

struct PreflightOptions {
  // The user the service runs as (User= of the unit). Empty: "rdmad" when run as root and that
  // user exists, else the caller's identity.
  std::string user;
};

struct PreflightReport {
  std::string identity;  // who the files were checked as: "user rdmad (uid 998, gid 998)"
  std::vector<std::string> errors;
  std::vector<std::string> warnings;
  std::vector<std::string> not_checked;
  std::vector<std::string> notes;  // what start-up would do (the embedded default's NICs)
  bool ok() const { return errors.empty(); }
};

PreflightReport preflight(const std::string& path, const PreflightOptions& options,
                          const verbs::BackendRegistry& backends);

}  // namespace rdmad::daemon
