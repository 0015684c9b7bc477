// rdmactl: operator CLI for rdmad. Talks to the daemon's client socket (status, nics, diagnose) and
// its admin socket (everything else, and the operator's part of status and nics) through librdmad.
//   rdmactl [--socket PATH] [--admin-socket PATH] [--json] status | nics | diagnose | peers | gids | flows | registrations |
//           cc show [--nic NAME] | cc set [--nic NAME] KNOB=VALUE... | cc set [--nic NAME] --profile FILE | reload
// Exit codes: 0 ok, 1 the daemon answered with an error, 2 usage error, 3 daemon unreachable,
// 4 not allowed to use the socket, 5 diagnose: a check failed.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "admin_commands.h"
#include "profile_push.h"
#include "output.h"
#include "rdmad/admin.h"
#include "rdmad/rdmad.h"

namespace {

using namespace rdmactl;

// The peer channel's mode and the detail of the daemon's "peer channel" diagnose line
// ("<level> peer channel: <mode>: <detail>", docs/protocol.md): off, insecure, psk or
// certificates; "unknown" from a daemon that does not say.
struct PeerChannelState {
  std::string mode = "unknown";
  std::string level;
  std::string detail;
};

PeerChannelState peer_channel_state(rdmad_client* c) {
  PeerChannelState out;
  const std::string key = " peer channel: ";
  bool found = false;
  for_each_diagnose_line(c, [&](const std::string& line) {
    const size_t at = line.find(key);
    if (found || at == std::string::npos || line.find(' ') != at) return;
    found = true;
    out.level = line.substr(0, at);
    std::string rest = line.substr(at + key.size());
    const size_t colon = rest.find_first_of(": (");
    out.mode = rest.substr(0, colon);
    out.detail = colon == std::string::npos ? "" : rest.substr(rest.find_first_not_of(": ", colon));
  });
  return out;
}

std::string peer_summary(const PeerChannelState& p) {
  if (p.mode == "insecure") return "INSECURE (plaintext, unauthenticated: [peer] insecure = true)";
  if (p.mode == "psk") return "TLS 1.3, pre-shared key";
  if (p.mode == "certificates") return "TLS 1.3, mutual certificates";
  if (p.mode == "off") return "off";
  return "unknown (the daemon does not report it)";
}

constexpr uint32_t kConnectTimeoutMs = 10000;

// The admin socket for the operator's requests: root and the daemon's uid only. On failure prints
// why (unless quiet) and returns the exit code.
int connect_admin(const std::string& path, uint32_t timeout_ms, rdmad_client** out, bool quiet) {
  const auto st = rdmad_connect_timeout(path.c_str(), timeout_ms, out);
  if (st == RDMAD_OK) {
    rdmad_set_reconnect_timeout_ms(*out, 0);
    return kExitOk;
  }
  *out = nullptr;
  if (st == RDMAD_ERR_PERMISSION) {
    if (!quiet)
      std::fprintf(stderr,
                   "rdmactl: not allowed to use rdmad's admin socket %s (root and the daemon's user only): %s\n",
                   path.c_str(), rdmad_last_error(nullptr));
    return kExitNotAllowed;
  }
  if (!quiet)
    std::fprintf(stderr, "rdmactl: cannot reach rdmad's admin socket at %s: %s: %s (is rdmad running? --admin-socket)\n",
                 path.c_str(), rdmad_strerror(st), rdmad_last_error(nullptr));
  return kExitUnreachable;
}

int cmd_status(rdmad_client* c, rdmad_client* admin, const std::string& socket, bool json) {
  size_t count = 0;
  if (const auto st = rdmad_query_nics(c, nullptr, 0, &count); st != RDMAD_OK) return fail(c, "query nics", st);
  const PeerChannelState peer = peer_channel_state(c);
  const bool listening_everywhere = peer.detail.find("listens on every address") != std::string::npos;
  // Version, uptime, node id, configuration and health are for operators (root or the daemon's uid).
  DaemonStatus d;
  const int drc = admin == nullptr ? -1 : daemon_status(admin, &d);
  if (drc > 0) return drc;
  const bool known = drc == kExitOk;
  if (json) {
    std::printf("{\"socket\":\"%s\",\"protocol_version\":%u,\"nics\":%zu,\"peer_channel\":\"%s\","
                "\"peer_channel_insecure\":%s,\"peer_listens_on_every_address\":%s%s%s}\n",
                json_escape(socket).c_str(), rdmad_protocol_version(c), count, json_escape(peer.mode).c_str(),
                peer.mode == "insecure" ? "true" : "false", listening_everywhere ? "true" : "false",
                known ? "," : "", known ? d.json.c_str() : "");
  } else {
    std::printf("daemon:   reachable at %s (protocol %u)\n", socket.c_str(), rdmad_protocol_version(c));
    if (known) std::printf("%s", d.text.c_str());
    std::printf("nics:     %zu%s\npeer:     %s%s\n", count,
                known ? fmt::format(" ({} up)", d.nics_up).c_str() : "", peer_summary(peer).c_str(),
                listening_everywhere ? "; listening on every address" : "");
    if (known) std::printf("%s%s", d.peers_line.c_str(), d.text_tail.c_str());
    else if (drc == -2) std::printf("(this rdmad is older than rdmactl: it does not report version, uptime or health)\n");
    else std::printf("(version, uptime, node id, configuration and health: run as root or as the daemon's user)\n");
  }
  return 0;
}

int cmd_nics(rdmad_client* c, bool json) {
  std::vector<rdmad_nic_info> nics(64);
  size_t count = 0;
  if (const auto st = rdmad_query_nics(c, nics.data(), nics.size(), &count); st != RDMAD_OK)
    return fail(c, "query nics", st);
  nics.resize(std::min(count, nics.size()));
  // NICs the daemon could not open keep their index; diagnose says why they are out of service.
  const auto out = out_of_service_nics(c);
  if (json) {
    std::printf("[");
    for (size_t i = 0; i < nics.size(); ++i) {
      const auto& n = nics[i];
      const auto o = out.find(n.name);
      std::printf("%s{\"index\":%u,\"name\":\"%s\",\"backend\":\"%s\",\"link\":\"%s\",\"speed_mbps\":%u,"
                  "\"pci_address\":\"%s\",\"numa_node\":%d%s}",
                  i ? "," : "", n.index, json_escape(n.name).c_str(), json_escape(n.backend).c_str(),
                  link_name(n.link_state), n.speed_mbps, json_escape(n.pci_address).c_str(), n.numa_node,
                  o == out.end() ? "" : (",\"out_of_service\":\"" + json_escape(o->second) + "\"").c_str());
    }
    std::printf("]\n");
    return 0;
  }
  std::printf("%-5s %-16s %-10s %-7s %12s %-14s %s\n", "INDEX", "NAME", "BACKEND", "LINK", "SPEED", "PCI", "NUMA");
  for (const auto& n : nics) {
    const bool gone = out.count(n.name) != 0;
    std::printf("%-5u %-16s %-10s %-7s %9u Mb/s %-14s %d\n", n.index, n.name, n.backend,
                gone ? "out" : link_name(n.link_state), n.speed_mbps, n.pci_address[0] ? n.pci_address : "-",
                n.numa_node);
  }
  for (const auto& [name, why] : out) std::printf("%s: out of service: %s\n", name.c_str(), why.c_str());
  if (nics.empty()) std::printf("(no NICs configured)\n");
  return 0;
}

// One diagnose line is "<result> <check>: <detail>" (result ok, info, warn or fail).
struct DiagnoseLine {
  std::string result, check, detail;
};

// What an operator can do about a check that is not ok, by the check's first word; empty where
// there is nothing to add to the detail.
std::string diagnose_hint(const DiagnoseLine& d) {
  if (d.result != "fail" && d.result != "warn") return "";
  const std::string kind = d.check.substr(0, d.check.find(' '));
  static const std::pair<const char*, const char*> kHints[] = {
      {"kernel", "dma-buf memory regions need Linux 5.12 or later"},
      {"gpu-driver", "GPUDirect RDMA through dma-buf needs NVIDIA's open kernel module, loaded"},
      {"nics", "configure a [[nic]] (docs/configuration.md) or check that the RDMA devices are visible"},
      {"dmabuf", "the NIC's backend must register dma-bufs: the rdma_core backend on a NIC that supports it"},
      {"gpudirect", "fix the failed checks it names"},
      {"cc", "rdmactl cc show; docs/nic-cc.md"},
      {"nic", "rdmactl nics shows the reason; the daemon retries the NIC with back-off"},
      {"peer", "configure [peer] tls or psk (docs/security.md)"},
  };
  for (const auto& [name, hint] : kHints)
    if (kind == name) return hint;
  return "";
}

DiagnoseLine parse_diagnose_line(const std::string& line) {
  DiagnoseLine d;
  const size_t space = line.find(' ');
  if (space == std::string::npos) {
    d.detail = line;
    return d;
  }
  d.result = line.substr(0, space);
  const size_t colon = line.find(": ", space + 1);
  d.check = line.substr(space + 1, colon == std::string::npos ? std::string::npos : colon - space - 1);
  if (colon != std::string::npos) d.detail = line.substr(colon + 2);
  return d;
}

int cmd_diagnose(rdmad_client* c, bool json) {
  std::string buf(16384, '\0');
  if (const auto st = rdmad_diagnose(c, buf.data(), buf.size()); st != RDMAD_OK) return fail(c, "diagnose", st);
  buf.resize(buf.find('\0'));
  std::vector<std::string> raw;
  std::vector<DiagnoseLine> lines;
  for (size_t start = 0; start < buf.size();) {
    size_t end = buf.find('\n', start);
    if (end == std::string::npos) end = buf.size();
    if (end > start) {
      raw.push_back(buf.substr(start, end - start));
      lines.push_back(parse_diagnose_line(raw.back()));
    }
    start = end + 1;
  }
  const bool failed =
      std::any_of(lines.begin(), lines.end(), [](const DiagnoseLine& d) { return d.result == "fail"; });
  if (json) {
    std::printf("[");
    for (size_t i = 0; i < lines.size(); ++i)
      std::printf("%s{\"check\":\"%s\",\"status\":\"%s\",\"detail\":\"%s\",\"hint\":\"%s\"}",
                  i == 0 ? "" : ",", json_escape(lines[i].check).c_str(), json_escape(lines[i].result).c_str(),
                  json_escape(lines[i].detail).c_str(), json_escape(diagnose_hint(lines[i])).c_str());
    std::printf("]\n");
  } else {
    for (size_t i = 0; i < raw.size(); ++i) {
      std::printf("%s\n", raw[i].c_str());
      if (const std::string hint = diagnose_hint(lines[i]); !hint.empty()) std::printf("  hint: %s\n", hint.c_str());
    }
  }
  return failed ? kExitChecksFailed : kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "rdmactl: operator CLI for rdmad. status, nics and diagnose use the client socket; peers, gids,\n"
      "flows, registrations, cc, reload and the details of nics and of status use the admin socket\n"
      "(root or the daemon's uid only).\n"
      "Exit codes: 0 ok; 1 the daemon answered with an error (unknown knob, permission denied, bad\n"
      "configuration file, ...; the message is on stderr); 2 usage error; 3 daemon unreachable;\n"
      "4 this user may not use the daemon's socket; 5 diagnose: a check failed.\n"
      "Examples:\n"
      "  rdmactl status                  version, uptime, node id, health (ok/degraded/failing and why)\n"
      "  rdmactl peers                   which peer is down, since when, its last error, rails, RTT\n"
      "  rdmactl gids                    the GID table of every port, like show_gids\n"
      "  rdmactl --json diagnose         one {check, status, detail, hint} object per check\n"
      "  rdmactl cc set --nic rail0 rpg_ai_rate=10\n"
      "  rdmactl cc set --profile ws.toml  push rdmad-sim tune's profile to every NIC, show what each runs\n"
      "  rdmactl -s /run/rdmad/rdmad.sock reload",
      "rdmactl"};
  std::string socket = "/run/rdmad/rdmad.sock";
  if (const char* env = std::getenv("RDMAD_SOCKET")) socket = env;
  std::string admin_socket;
  if (const char* env = std::getenv("RDMAD_ADMIN_SOCKET")) admin_socket = env;
  bool json = false;
  // Longer than the library's default: the first command may start a socket-activated daemon
  // (systemd holds the connection until it answers), which on a loaded node takes seconds.
  uint32_t connect_timeout_ms = kConnectTimeoutMs;
  app.add_option("-s,--socket", socket, "Daemon socket (default $RDMAD_SOCKET or /run/rdmad/rdmad.sock)");
  app.add_option("--connect-timeout", connect_timeout_ms,
                 "How long to wait for the daemon to answer, in ms (default 10000: a socket-activated daemon's "
                 "start included)")
      ->check(CLI::Range(1, 600000));
  app.add_option("--admin-socket", admin_socket,
                 "The daemon's admin socket (default $RDMAD_ADMIN_SOCKET, else admin.sock in the client socket's "
                 "directory name + \"-admin\": /run/rdmad-admin/admin.sock)");
  app.add_flag("--json", json, "Machine-readable output");
  app.require_subcommand(1);
  auto* status = app.add_subcommand(
      "status",
      "Is the daemon reachable; version, uptime, node id, configuration file, health (ok, degraded, failing: why); "
      "NICs; peer channel security (insecure, TLS); reloads");
  auto* nics = app.add_subcommand("nics", "The node's NICs: backend, link, speed, PCI address, NUMA node; as root also GID, MTU, counters, DCQCN rates and CC parameters");
  auto* diagnose = app.add_subcommand("diagnose", "Why GPUDirect RDMA is or is not available, and the NICs' congestion-control checks, one line per check");
  auto* peers = app.add_subcommand(
      "peers", "Every peer daemon this node knows: address, state, rails, keepalive RTT, since when, last error");
  auto* gids = app.add_subcommand(
      "gids", "The GID table of every port (device, port, index, GID, IPv4, RoCE version, netdev), like show_gids");
  auto* flows =
      app.add_subcommand("flows", "Every client's flows: peer, channel, state, requests in flight, owner");
  auto* regs =
      app.add_subcommand("registrations", "Every client's memory registrations: kind, length, access, owner");
  auto* cc = app.add_subcommand("cc", "DCQCN parameters of the NICs");
  cc->require_subcommand(1);
  std::string nic;
  auto* cc_show = cc->add_subcommand("show", "The DCQCN knobs in force, per NIC (mlx5 knob names and units)");
  cc_show->add_option("--nic", nic, "Only this [[nic]] (default: every NIC)");
  auto* cc_set =
      cc->add_subcommand("set", "Change knobs live: soft NICs at once, hardware NICs written and read back");
  std::vector<std::string> assignments;
  std::string profile_file;
  cc_set->add_option("--nic", nic, "Only this [[nic]] (default: every NIC)");
  cc_set->add_option("assignments", assignments, "KNOB=VALUE (integer, in the knob's units)");
  cc_set->add_option("--profile", profile_file,
                     "A DCQCN profile file (rdmad-sim tune writes them): set every knob it lists, then read back what "
                     "each NIC runs; exit 1 when a NIC runs another value");
  auto* reload = app.add_subcommand("reload", "Re-read the configuration file (as SIGHUP does)");
  // The command word, checked here so that a typo is named (CLI11 would only say that a
  // subcommand is required).
  std::string commands;
  std::vector<std::string> names;
  for (const auto* sub : app.get_subcommands({})) {
    names.push_back(sub->get_name());
    commands += (commands.empty() ? "" : ", ") + sub->get_name();
  }
  // Hidden (not in --help or the command list): the test hooks of a daemon started with
  // --enable-test-hooks, which refuses them otherwise.
  auto* debug = app.add_subcommand("debug", "Test hooks of a daemon started with --enable-test-hooks");
  debug->group("");
  debug->require_subcommand(1);
  auto* debug_stall = debug->add_subcommand("stall", "Make a daemon thread spin busy (the watchdog's test)");
  std::string stall_thread;
  uint32_t stall_seconds = 0;
  debug_stall->add_option("thread", stall_thread, "datapath:NIC or flow-engine")->required();
  debug_stall->add_option("seconds", stall_seconds, "1..3600")->required()->check(CLI::Range(1, 3600));
  names.push_back("debug");
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-s" || arg == "--socket" || arg == "--admin-socket" || arg == "--connect-timeout") {
      ++i;  // its value
      continue;
    }
    if (arg.empty() || arg[0] == '-') continue;
    if (std::find(names.begin(), names.end(), arg) == names.end()) {
      std::fprintf(stderr, "rdmactl: unknown command '%s' (commands: %s; rdmactl --help)\n", arg.c_str(),
                   commands.c_str());
      return kExitUsage;
    }
    break;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::RequiredError& e) {
    if (app.get_subcommands().empty()) {
      std::fprintf(stderr, "rdmactl: a command is required (commands: %s; rdmactl --help)\n", commands.c_str());
      return kExitUsage;
    }
    if (cc->parsed() && cc->get_subcommands().empty()) {
      std::fprintf(stderr, "rdmactl cc: show or set is required (rdmactl cc --help)\n");
      return kExitUsage;
    }
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  if (cc_set->parsed() && !profile_file.empty() && !assignments.empty()) {
    std::fprintf(stderr, "rdmactl: cc set: give KNOB=VALUE... or --profile FILE, not both\n");
    return kExitUsage;
  }
  if (cc_set->parsed() && profile_file.empty()) {
    if (std::string problem = check_assignments(assignments); !problem.empty()) {
      std::fprintf(stderr, "rdmactl: cc set: %s\n", problem.c_str());
      return kExitUsage;
    }
  }
  if (admin_socket.empty()) admin_socket = rdmad::admin::default_admin_socket(socket);
  rdmad_client* a = nullptr;
  // The operator's commands use the admin socket only.
  const bool on_client_socket = status->parsed() || nics->parsed() || diagnose->parsed();
  if (!on_client_socket) {
    if (const int arc = connect_admin(admin_socket, connect_timeout_ms, &a, false); arc != kExitOk) return arc;
  }
  rdmad_client* c = nullptr;
  if (!on_client_socket) {
    c = a;
  } else if (const auto st = rdmad_connect_timeout(socket.c_str(), connect_timeout_ms, &c); st != RDMAD_OK) {
    if (st == RDMAD_ERR_PERMISSION) {
      std::fprintf(stderr, "rdmactl: not allowed to use rdmad at %s: %s\n", socket.c_str(), rdmad_last_error(nullptr));
      return kExitNotAllowed;
    }
    std::fprintf(stderr, "rdmactl: cannot reach rdmad at %s: %s: %s\n", socket.c_str(), rdmad_strerror(st),
                 rdmad_last_error(nullptr));
    return kExitUnreachable;
  }
  rdmad_set_reconnect_timeout_ms(c, 0);
  // status and nics add the operator's part where this user may use the admin socket.
  if (status->parsed() || nics->parsed()) connect_admin(admin_socket, connect_timeout_ms, &a, true);
  int rc = 0;
  if (status->parsed()) rc = cmd_status(c, a, socket, json);
  if (nics->parsed()) {
    // The basic list is for every client; the details (address, counters, CC) for operators.
    if (json) {
      rc = a == nullptr ? -1 : rdmactl::cmd_nic_details(a, json);
      if (rc < 0) rc = cmd_nics(c, json);
    } else {
      rc = cmd_nics(c, json);
      if (rc == 0) {
        const int d = a == nullptr ? -1 : rdmactl::cmd_nic_details(a, json);
        if (d < 0) std::printf("(addresses, counters and CC parameters: run as root, reaches the admin socket)\n");
        else rc = d;
      }
    }
  }
  if (diagnose->parsed()) rc = cmd_diagnose(c, json);
  if (peers->parsed()) rc = cmd_peers(c, json);
  if (gids->parsed()) rc = cmd_gids(c, json);
  if (flows->parsed()) rc = cmd_flows(c, json);
  if (regs->parsed()) rc = cmd_registrations(c, json);
  if (cc_show->parsed()) rc = cmd_cc_show(c, nic, json);
  if (cc_set->parsed()) {
    rc = profile_file.empty() ? cmd_cc_set(c, nic, assignments, json) : cmd_cc_set_profile(c, nic, profile_file, json);
  }
  if (reload->parsed()) rc = cmd_reload(c, json);
  if (debug_stall->parsed()) rc = rdmactl::cmd_debug_stall(c, stall_thread, stall_seconds, json);
  if (a != nullptr && a != c) rdmad_disconnect(a);
  rdmad_disconnect(c);
  return rc;
}
