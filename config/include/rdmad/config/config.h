#pragma once
// The daemon's configuration as typed values. Every field is described once, in the field table
// (field.h); parsing, `--print-default-config` and docs/configuration.md are generated from it.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rdmad/cc/dcqcn_params.h"
#include "rdmad/verbs/backend_options.h"

namespace rdmad::config {

struct DaemonSection {
  std::string runtime_dir;
  std::string socket_path;
  std::string log_level;
  std::string sysfs_root;          // stands in for "/" when reading /sys (containers mount the host's elsewhere)
  int64_t nic_poll_interval_ms = 10000;  // hardware counter sampling and CC health checks
  std::string embedded_nic_address = "127.0.0.1";  // without [[nic]] nor RDMA device: the soft NIC's IP, or "primary"
};

struct MetricsSection {
  std::string listen;                         // host:port of the /metrics endpoint
  std::map<std::string, std::string> labels;  // constant labels of rdmad_node_info
  int64_t probe_timeout_ms = 1000;            // /healthz and /readyz: how long the control loop may take
};

struct CcSection {
  std::string profile;                        // "mlx5" or "paper"
  std::string profile_file;                   // a DCQCN profile file (cc/dcqcn_profile.h); replaces `profile`
  std::string profile_file_name;              // that file's [profile] name, filled by the loader
  std::map<std::string, int64_t> overrides;   // mlx5 knob name -> value, applied over the profile
  cc::DcqcnParams params;                     // profile (or profile file) + overrides, filled by the loader

  // What the parameters came from, for logs: "mlx5", or "file /etc/rdmad/ws.toml (ws-50, base mlx5)".
  std::string source() const;
};

struct NicSection {
  std::string name;
  std::string backend;  // a backend of the registry (verbs::builtin_backends)
  std::string address;  // IP address (soft); optional for rdma_core (selects the GID of that address)
  std::string device;   // rdma-core device name (rdma_core)
  std::string gid_match;    // rdma_core: CIDR the selected GID's address must lie in ("" = any)
  bool cc_apply = false;    // rdma_core: write the [cc] parameters to the NIC (else read and report only)
  int64_t roce_priority = 3;  // 802.1p priority carrying RoCE traffic (CC misconfiguration checks)
  int64_t cnp_dscp = -1;      // DSCP of the NIC's CNPs (soft; rdma_core with cc_apply); -1: [cc] cnp_dscp
  std::string advertise_address;   // soft: IP peers send to instead of `address` ("" = address)
  int64_t advertise_udp_port = 0;  // soft: UDP port peers send to (0 = udp_port)
  // The backends' options have keys generated from their tables (verbs::BackendInfo::options). The
  // ones the loader and the daemon read themselves are members; every other is in `options`, at
  // the value the file gives or the table's default (a section made in code holds none: the
  // backend's defaults apply).
  int64_t port = 1;         // device port number (rdma_core)
  int64_t udp_port = 4791;  // UDP port of the RoCEv2 endpoint (soft)
  int64_t gid_index = -1;   // rdma_core: fixed GID index; -1 selects a RoCEv2 GID automatically
  verbs::BackendOptions options;

  /// The value this section gives backend option `name` (a member or `options`); nullopt where
  /// it gives none.
  std::optional<verbs::OptionValue> backend_option(std::string_view option) const;

  bool operator==(const NicSection&) const = default;
};

struct IpcSection {
  std::string socket_mode;             // octal, e.g. "0660"
  std::string socket_group;            // group owning the socket, a name or a number ("" keeps the daemon's)
  std::string admin_socket_path;       // "" = "<client socket's directory>-admin/admin.sock"
  std::string proc_root = "/proc";     // where clients' /proc/<pid>/cgroup is read (tests: a fixture tree)
  std::vector<int64_t> allowed_uids;   // besides root; both lists empty: the socket's mode is the gate
  std::vector<int64_t> allowed_gids;
  int64_t max_clients = 16384;
  int64_t workers = 0;                 // client-service threads; 0: min(4, hardware threads)
  int64_t quota_pinned_bytes = 0;      // default per-uid quota
  int64_t quota_registrations = 0;
  int64_t quota_connections = 0;
  int64_t quota_flows = 0;
  int64_t quota_exports = 0;
  int64_t nic_table_share_percent = 25;  // of a NIC's memory-region table one uid may fill
  int64_t hello_timeout_ms = 5000;
  int64_t idle_timeout_ms = 300000;
  int64_t resume_grace_ms = 60000;  // sessions of the previous run wait this long to be resumed (0: none kept)
};

struct QuotaSection {  // a per-tenant quota overriding the defaults of [ipc]: one uid or one pod
  int64_t uid = -1;
  std::string pod_uid;  // a Kubernetes pod's UID (lower case, with dashes); "" = uid names the tenant
  int64_t pinned_bytes = 0;
  int64_t registrations = 0;
  int64_t connections = 0;
  int64_t flows = 0;
  int64_t exports = 0;

  bool operator==(const QuotaSection&) const = default;
};

struct PeerSection {  // the TCP control channel between daemons, and with it flows
  bool enabled = false;
  std::string node_id;      // this daemon's id; "" = the host name (filled by the daemon, not the loader)
  std::string listen;       // raw "host:port" / "[v6]:port"; "" = the first [[nic]] address, port 18515
  std::string listen_host;  // IP literal, without brackets (filled by the loader when listen is "")
  int64_t listen_port = 18515;  // 0: an ephemeral port
  // Credentials: mutual TLS (all three tls_* files) or a pre-shared key (key_file), never both.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_san_uri_prefix;  // URI SANs prefix + node id bind a node id too ("" = DNS SANs only)
  std::string key_file;            // TLS 1.3 external PSK, identity = node id
  bool insecure = false;           // no credentials: plaintext, unauthenticated (trusted test networks)
  int64_t handshake_timeout_ms = 5000;
  int64_t max_handshakes = 64;            // accepted connections not yet authenticated, in all
  int64_t max_handshakes_per_source = 8;  // ... and from one source address
  int64_t send_queue_bytes = 4 << 20;     // queued to one peer before its session is dropped
  int64_t keepalive_interval_ms = 1000;
  int64_t keepalive_misses = 3;
  int64_t reconnect_min_ms = 100;
  int64_t reconnect_max_ms = 30000;
  int64_t qp_timeout = 14;    // local ACK timeout, 4.096 us * 2^qp_timeout
  int64_t qp_retry_cnt = 7;
  // Discovery through DNS: "dns:NAME" (A/AAAA, port discover_port), "dns-srv:NAME" (SRV), "" none.
  std::string discover;
  int64_t discover_port = 18515;
  int64_t discover_interval_ms = 30000;
  int64_t idle_session_ms = 300000;  // a discovered node's session without a flow is closed; 0 never

  bool operator==(const PeerSection&) const = default;
  /// Which credentials are set: "certificates", "psk", "insecure", or "none" (a config error).
  std::string security() const {
    if (insecure) return "insecure";
    if (!tls_cert_file.empty()) return "certificates";
    if (!key_file.empty()) return "psk";
    return "none";
  }
};

struct PeerNodeSection {  // one [[peers]] entry: a daemon this one dials
  std::string node_id;
  std::string address;  // raw "host:port" / "[v6]:port"
  std::string host;     // IP literal, without brackets
  int64_t port = 0;     // 1..65535

  bool operator==(const PeerNodeSection&) const = default;
};

/// The most RC queue pairs one lane (NIC pair to a peer) may have ([flow] qps_per_lane).
inline constexpr int64_t kMaxQpsPerLane = 16;
/// The most QP endpoints one peer handshake carries (its count is one byte): [[nic]] sections ×
/// qps_per_lane must stay within it.
inline constexpr int64_t kMaxHandshakeEndpoints = 255;

struct FlowSection {  // striping of flows across NICs and peers
  std::string policy = "weighted";  // weighted | congestion_aware | round_robin | hash
  int64_t chunk_bytes = 1048576;
  int64_t lane_window_chunks = 8;  // chunks in flight per NIC per peer
  int64_t qps_per_lane = 1;        // RC QPs per lane (1..kMaxQpsPerLane); the peer's may be fewer
  int64_t sq_depth = 256;          // power of two
  int64_t cq_depth = 512;          // power of two
  int64_t max_flows_per_client = 64;
  int64_t max_grants_per_peer = 4096;
  int64_t max_receives_per_peer = 4096;
  double min_lane_fraction = 0.25;
  bool honour_pci_distance = true;
  double cnp_half_weight_per_s = 1000;
  int64_t rejoin_backoff_min_ms = 100;
  int64_t rejoin_backoff_max_ms = 10000;

  bool operator==(const FlowSection&) const = default;
};

struct Config {
  DaemonSection daemon;
  MetricsSection metrics;
  CcSection cc;
  IpcSection ipc;
  std::vector<NicSection> nics;
  std::vector<QuotaSection> quotas;
  PeerSection peer;
  std::vector<PeerNodeSection> peers;
  FlowSection flow;
  std::string source;  // file the config came from ("<default>" for the embedded one)
};

/// The admin socket's path: [ipc] admin_socket_path, or where it defaults to beside the client
/// socket's directory ("/run/rdmad/rdmad.sock" -> "/run/rdmad-admin/admin.sock").
std::string admin_socket_path(const Config& c);
/// The default admin socket for a client socket path (what rdmactl assumes without --admin-socket).
std::string default_admin_socket_path(const std::string& client_socket_path);

}  // namespace rdmad::config
