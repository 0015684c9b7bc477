// Shared pieces of rdmactl's commands: exit codes, error reporting, JSON string escaping.
#pragma once

#include <string>

#include "rdmad/rdmad.h"

namespace rdmactl {

// Exit codes (documented in --help).
inline constexpr int kExitOk = 0;
inline constexpr int kExitDaemonError = 1;  // the daemon answered with an error (incl. permission denied)
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnreachable = 3;

std::string json_escape(const std::string& s);
// "up", "down", "unknown".
const char* link_name(rdmad_link_state s);
// Prints "rdmactl: <what>: <status>: <daemon's message>" to stderr; returns kExitDaemonError, or
// kExitUnreachable when the connection was lost (the daemon stopped or died under the request).
int fail(rdmad_client* c, const char* what, rdmad_status st);

}  // namespace rdmactl
