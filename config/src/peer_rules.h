#pragma once
// The [peer] rules that involve more than one key or the file system: which credentials are set
// (mutual TLS, a pre-shared key, or an explicit insecure = true), whether their files are fit to
// read, and the listen address when none is written.
#include <functional>
#include <string>

#include "rdmad/config/config.h"

namespace rdmad::config {

enum class Finding : uint8_t {
  kError,
  kWarning,     // does not make the file invalid
  kNotChecked,  // a check that cannot run here (a systemd credential outside the service)
};

/// Reports one finding about `key` (e.g. "peer.tls_key_file").
using PeerRuleReport = std::function<void(const std::string& key, const std::string& message, Finding finding)>;

/// Runs the rules when the peer channel is enabled; fills listen_host (and the port) from the
/// first [[nic]] address when [peer] listen is empty, and replaces each "credential:NAME" setting
/// by the path it names ($CREDENTIALS_DIRECTORY/NAME). Without $CREDENTIALS_DIRECTORY such a
/// setting is an error, or, with `credentials_elsewhere` (--check-config outside the service), a
/// check not run.
void check_peer_security(Config& c, bool check_files, bool credentials_elsewhere, const PeerRuleReport& report);

}  // namespace rdmad::config
