#pragma once
// The [peer] rules that involve more than one key or the file system: which credentials are set
// (mutual TLS, a pre-shared key, or an explicit insecure = true), whether their files are fit to
// read, and the listen address when none is written.
#include <functional>
#include <string>

#include "rdmad/config/config.h"

namespace rdmad::config {

/// Reports one finding about `key` (e.g. "peer.tls_key_file"); warnings do not make the file invalid.
using PeerRuleReport = std::function<void(const std::string& key, const std::string& message, bool warning)>;

/// Runs the rules when the peer channel is enabled; fills listen_host (and the port) from the
/// first [[nic]] address when [peer] listen is empty.
void check_peer_security(Config& c, bool check_files, const PeerRuleReport& report);

}  // namespace rdmad::config
