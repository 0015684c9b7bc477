// Shared pieces of rdmactl's commands: exit codes, error reporting, JSON string escaping.
#pragma once

#include <cstring>
#include <functional>
#include <map>
#include <string>

#include "rdmad/rdmad.h"

namespace rdmactl {

// Exit codes (documented in --help).
inline constexpr int kExitOk = 0;
inline constexpr int kExitDaemonError = 1;  // the daemon answered with an error (incl. permission denied)
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnreachable = 3;
inline constexpr int kExitNotAllowed = 4;     // this user may not use the daemon's socket
inline constexpr int kExitChecksFailed = 5;   // diagnose: at least one check says fail

std::string json_escape(const std::string& s);
// A fixed-size text field of a reply, up to its NUL (or all of it).
template <size_t N>
std::string field(const char (&s)[N]) {
  return std::string(s, strnlen(s, N));
}
// "up", "down", "unknown".
const char* link_name(rdmad_link_state s);
// Prints "rdmactl: <what>: <status>: <daemon's message>" to stderr; returns kExitDaemonError, or
// kExitUnreachable when the connection was lost (the daemon stopped or died under the request).
int fail(rdmad_client* c, const char* what, rdmad_status st);
// Calls `line(text)` for every line of the daemon's diagnosis (rdmad_diagnose); false when it fails.
bool for_each_diagnose_line(rdmad_client* c, const std::function<void(const std::string&)>& line);
// The NICs the daemon has out of service, by [[nic]] name, with "device DEV: REASON", from its
// diagnose lines ("warn nic NAME: out of service (device DEV): REASON"; docs/protocol.md). Empty
// when diagnose fails or names none.
std::map<std::string, std::string> out_of_service_nics(rdmad_client* c);

}  // namespace rdmactl
