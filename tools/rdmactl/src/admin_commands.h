// rdmactl's operator commands, served by the daemon's admin requests (uid 0 or the daemon's uid).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rdmad/rdmad.h"

namespace rdmactl {

int cmd_flows(rdmad_client* c, bool json);
// Port, address, counters, software DCQCN summary and CC parameters of each NIC (root only; the
// caller falls back to the basic list when this returns kExitPermission... see main.cc).
// Returns -1 (printing nothing) when the daemon refuses the details for permission.
int cmd_nic_details(rdmad_client* c, bool json);
int cmd_registrations(rdmad_client* c, bool json);
// One NIC's DCQCN knobs as the daemon reports them (kCcShow).
struct CcShownNic {
  std::string nic, backend, source;
  bool software = false;  // DCQCN runs in the daemon (a soft NIC)
  bool more = false;      // a NIC follows at cursor + 1
  std::vector<std::pair<std::string, std::optional<int64_t>>> knobs;  // nullopt: unreadable
};
// The NIC `nic`, or when empty the NIC at `cursor`; kExitOk, or the exit code after printing the error.
int fetch_cc_show(rdmad_client* c, const std::string& nic, uint32_t cursor, CcShownNic* out);
// nic empty: every NIC.
int cmd_cc_show(rdmad_client* c, const std::string& nic, bool json);
// assignments: "KNOB=VALUE" strings (already checked by parse_assignments).
int cmd_cc_set(rdmad_client* c, const std::string& nic, const std::vector<std::string>& assignments,
               bool json);
int cmd_reload(rdmad_client* c, bool json);
// Hidden `debug stall THREAD SECONDS`: the daemon's test hook (rdmad --enable-test-hooks).
int cmd_debug_stall(rdmad_client* c, const std::string& thread, uint32_t seconds, bool json);
// node_commands.cc
int cmd_peers(rdmad_client* c, bool json);
int cmd_gids(rdmad_client* c, bool json);

// The daemon's own part of `status` (kStatus), formatted for the text and JSON forms.
struct DaemonStatus {
  std::string health;     // "ok", "degraded", "failing"
  std::string reasons;    // "; "-separated
  std::string text;       // version, node, config, uptime and health lines
  std::string peers_line;  // with [peer] enabled
  std::string text_tail;  // the reload line
  std::string json;       // its members, without braces
  uint32_t nics_up = 0;
};
// kExitOk and fills *out; -1 (printing nothing) when the daemon refuses it for permission, -2
// when the daemon is older than the request; else the exit code after printing the error.
int daemon_status(rdmad_client* c, DaemonStatus* out);

// Checks the KNOB=VALUE syntax before anything is sent; empty when fine, else the problem.
std::string check_assignments(const std::vector<std::string>& assignments);

}  // namespace rdmactl
