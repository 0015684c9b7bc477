// The field table. To add a configuration key: add a Field here (and a member in config.h);
// parsing, the default config and docs/configuration.md follow from it.
#include <fmt/format.h>

#include <vector>

#include "rdmad/cc/dcqcn_params.h"
#include "rdmad/config/field.h"
#include "rdmad/verbs/builtin_backends.h"
#include "nic_options.h"
#include "validators.h"

namespace rdmad::config {
namespace {

namespace v = validators;

template <typename T>
const T& as(const Value& value) {
  return std::get<T>(value);
}

std::vector<Section> make_sections() {
  return {
      {"daemon", "Process-wide settings of the daemon.", false},
      {"metrics", "The HTTP endpoint: Prometheus /metrics and the probes /healthz and /readyz.", false},
      {"cc", "DCQCN congestion control: a named profile plus per-knob overrides under the mlx5 knob names.",
       false},
      {"ipc", "The Unix socket that local applications use through librdmad: who may connect, and per-uid quotas.",
       false},
      {"quota", "A per-uid quota that overrides the [ipc] defaults for one user.", true},
      {"nic", "One table per NIC the daemon drives. With no [[nic]] table, every port of the RDMA devices "
              "found is a NIC (named after its device, e.g. mlx5_0, or mlx5_0-2 for port 2), and without RDMA "
              "devices one soft NIC, soft0, runs on [daemon] embedded_nic_address.",
       true},
      {"peer", "The peer channel: a TLS 1.3 control connection to the rdmad of other nodes, over which flows "
               "between nodes are set up (docs/security.md). Off unless enabled; enabled needs credentials "
               "(certificates or a pre-shared key) or insecure = true; all its keys take effect at the next restart.",
       false},
      {"peers", "One table per remote daemon this node dials. A pair of nodes needs an entry on at least one side "
                "(the other accepts); listing each other on both sides is fine. Needs [peer] enabled = true.",
       true},
      {"flow", "Flows between nodes: how a transfer is cut into chunks and striped over the lanes (local NICs) "
               "towards a peer, and how lanes fail over and rejoin. Used only with [peer] enabled; takes effect at "
               "the next restart.",
       false},
  };
}

// A time in milliseconds, bounded above so that conversions to nanoseconds cannot overflow.
constexpr int64_t kMaxMs = 3600000;
// The peer channel's TCP port when [peer] listen is empty.
constexpr int64_t kDefaultPeerPort = 18515;

// [[nic]] backend takes the names of the backends built into this binary, nothing else.
std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const auto& b : verbs::builtin_backends()) names.push_back(b.name);
  return names;
}
std::string backend_choices() { return fmt::format("one of {}", fmt::join(backend_names(), ", ")); }

void add_peer_fields(std::vector<Field>& f) {
  f.push_back({"peer", "enabled", FieldType::kBool, false,
               "Turn on the peer channel and with it flows between nodes (it then needs tls_ca_file, tls_cert_file and "
               "tls_key_file, or key_file, or insecure = true); when false the daemon neither accepts peers on listen "
               "nor dials [[peers]], and clients cannot open flows.",
               "true or false", false, nullptr, [](Config& c, size_t, const Value& x) { c.peer.enabled = as<bool>(x); }});
  f.push_back({"peer", "node_id", FieldType::kString, std::string(""),
               "This node's id in the cluster: it presents it when connecting and other nodes list it as their "
               "[[peers]] node_id. Must be unique in the cluster; empty uses the host name.",
               "a name of 1-64 letters, digits, '_', '.' or '-', or empty (the host name)", false,
               v::identifier(true), [](Config& c, size_t, const Value& x) { c.peer.node_id = as<std::string>(x); }});
  f.push_back({"peer", "listen", FieldType::kString, std::string(""),
               "IP address and TCP port the peer channel accepts connections on; empty takes the address of the "
               "first [[nic]] that has one, port 18515 (without such a NIC, set it). A wildcard (0.0.0.0 or [::]) "
               "accepts on every address and is logged at warning: prefer a management or NIC address; port 0 "
               "picks a free port (tests).",
               "an IP address and port, or empty", false, v::listen_address(true), [](Config& c, size_t, const Value& x) {
                 c.peer.listen = as<std::string>(x);
                 c.peer.listen_host.clear();
                 c.peer.listen_port = kDefaultPeerPort;
                 if (!c.peer.listen.empty()) v::split_host_port(c.peer.listen, c.peer.listen_host, c.peer.listen_port);
               }});
  f.push_back({"peer", "tls_ca_file", FieldType::kString, std::string(""),
               "PEM file of the CA (or CAs) that signs every node's peer certificate (mutual TLS 1.3, with "
               "tls_cert_file and tls_key_file): a peer is accepted only with a certificate from it whose DNS SAN "
               "(or URI SAN, see tls_san_uri_prefix) is the node id it claims. Use a CA that signs rdmad's "
               "certificates only.",
               "an absolute path, credential:NAME (a systemd credential), or empty", false, v::credential_path(),
               [](Config& c, size_t, const Value& x) { c.peer.tls_ca_file = as<std::string>(x); }});
  f.push_back({"peer", "tls_cert_file", FieldType::kString, std::string(""),
               "PEM file of this node's certificate (and any intermediates), with this node's id as a DNS SAN; it "
               "serves both as TLS server and client certificate. Re-read when it changes (certificate rotation).",
               "an absolute path, credential:NAME (a systemd credential), or empty", false, v::credential_path(),
               [](Config& c, size_t, const Value& x) { c.peer.tls_cert_file = as<std::string>(x); }});
  f.push_back({"peer", "tls_key_file", FieldType::kString, std::string(""),
               "PEM file of the private key of tls_cert_file; must be readable by the daemon only (mode 0600 or "
               "0400, owned by root or the daemon's user); under systemd a root-only key is passed with "
               "LoadCredential=NAME:PATH and named credential:NAME.",
               "an absolute path, credential:NAME (a systemd credential), or empty", false, v::credential_path(),
               [](Config& c, size_t, const Value& x) { c.peer.tls_key_file = as<std::string>(x); }});
  f.push_back({"peer", "tls_san_uri_prefix", FieldType::kString, std::string(""),
               "With certificates: a URI SAN equal to this prefix followed by the node id also proves that id (e.g. "
               "spiffe://cluster.local/rdmad/ for SPIFFE-style ids); empty accepts DNS SANs only.",
               "a URI prefix such as spiffe://cluster.local/rdmad/, or empty", false, v::uri_prefix(),
               [](Config& c, size_t, const Value& x) { c.peer.tls_san_uri_prefix = as<std::string>(x); }});
  f.push_back({"peer", "key_file", FieldType::kString, std::string(""),
               "Instead of certificates: a file holding the cluster's pre-shared key (at least 16 bytes; trailing "
               "whitespace is ignored), used as a TLS 1.3 external PSK with the node id as identity. Every node "
               "holds the same key, so any holder can claim any node id: prefer certificates. Must be readable by "
               "the daemon only; under systemd a root-only key is passed with LoadCredential=NAME:PATH and named "
               "credential:NAME ($CREDENTIALS_DIRECTORY/NAME).",
               "an absolute path, credential:NAME (a systemd credential), or empty", false, v::credential_path(),
               [](Config& c, size_t, const Value& x) { c.peer.key_file = as<std::string>(x); }});
  f.push_back({"peer", "insecure", FieldType::kBool, false,
               "Run the peer channel without credentials: plaintext TCP, no authentication, so anyone who reaches "
               "the port can claim a node id and receive its grants. Only for trusted test networks; logged at "
               "warning on every start and shown by rdmactl status.",
               "true or false", false, nullptr, [](Config& c, size_t, const Value& x) { c.peer.insecure = as<bool>(x); }});
  f.push_back({"peer", "handshake_timeout_ms", FieldType::kInt, int64_t{5000},
               "Milliseconds a new peer connection (TCP connect, TLS handshake and hello) may take before it is "
               "closed and counted.",
               "an integer in [100, 600000]", false, v::int_range(100, 600000),
               [](Config& c, size_t, const Value& x) { c.peer.handshake_timeout_ms = as<int64_t>(x); }});
  f.push_back({"peer", "max_handshakes", FieldType::kInt, int64_t{64},
               "Accepted peer connections that have not finished their handshake, in all; more are closed at once "
               "and counted (rdmad_peer_connections_refused_total), so half-open connections cannot exhaust file "
               "descriptors.",
               "an integer in [1, 65536]", false, v::int_range(1, 65536),
               [](Config& c, size_t, const Value& x) { c.peer.max_handshakes = as<int64_t>(x); }});
  f.push_back({"peer", "max_handshakes_per_source", FieldType::kInt, int64_t{8},
               "The same from one source IP address (at most max_handshakes), so one host cannot take every slot.",
               "an integer in [1, 65536], at most max_handshakes", false, v::int_range(1, 65536),
               [](Config& c, size_t, const Value& x) { c.peer.max_handshakes_per_source = as<int64_t>(x); }});
  f.push_back({"peer", "send_queue_bytes", FieldType::kInt, int64_t{4 << 20},
               "Bytes queued to one peer that it has not read yet: above half of it the daemon stops reading from "
               "that peer (back-pressure), beyond it the session is dropped and counted "
               "(rdmad_peer_send_queue_overflows_total) instead of growing memory.",
               "an integer in [262144, 1073741824]", false, v::int_range(262144, 1073741824),
               [](Config& c, size_t, const Value& x) { c.peer.send_queue_bytes = as<int64_t>(x); }});
  f.push_back({"peer", "keepalive_interval_ms", FieldType::kInt, int64_t{1000},
               "Milliseconds between keepalive pings on a peer connection; lower detects a dead peer sooner at the "
               "cost of more control traffic.",
               "an integer in [10, 3600000]", false, v::int_range(10, kMaxMs),
               [](Config& c, size_t, const Value& x) { c.peer.keepalive_interval_ms = as<int64_t>(x); }});
  f.push_back({"peer", "keepalive_misses", FieldType::kInt, int64_t{3},
               "A peer silent for keepalive_interval_ms x keepalive_misses is declared dead: its connection is closed "
               "and it is dialled again. Raise it on a lossy or busy management network.",
               "an integer in [1, 1000]", false, v::int_range(1, 1000),
               [](Config& c, size_t, const Value& x) { c.peer.keepalive_misses = as<int64_t>(x); }});
  f.push_back({"peer", "reconnect_min_ms", FieldType::kInt, int64_t{100},
               "Milliseconds before the first new dial of a lost or unreachable peer; the delay doubles (with "
               "jitter) after each failed attempt up to reconnect_max_ms.",
               "an integer in [1, 3600000]", false, v::int_range(1, kMaxMs),
               [](Config& c, size_t, const Value& x) { c.peer.reconnect_min_ms = as<int64_t>(x); }});
  f.push_back({"peer", "reconnect_max_ms", FieldType::kInt, int64_t{30000},
               "Longest delay in milliseconds between dials of a peer that stays unreachable (at least "
               "reconnect_min_ms); lower reconnects sooner after a long outage, higher dials a down node less often.",
               "an integer in [1, 3600000], at least reconnect_min_ms", false, v::int_range(1, kMaxMs),
               [](Config& c, size_t, const Value& x) { c.peer.reconnect_max_ms = as<int64_t>(x); }});
  f.push_back({"peer", "qp_timeout", FieldType::kInt, int64_t{14},
               "Local ACK timeout of the flow QPs as the verbs exponent n: a packet unacknowledged for 4.096 us x "
               "2^n is retransmitted (14: about 67 ms; 0: wait forever). Raise it on large or congested fabrics, "
               "lower it to detect a dead path sooner.",
               "an integer in [0, 31]", false, v::int_range(0, 31),
               [](Config& c, size_t, const Value& x) { c.peer.qp_timeout = as<int64_t>(x); }});
  f.push_back({"peer", "qp_retry_cnt", FieldType::kInt, int64_t{7},
               "Retransmissions of an unacknowledged packet before a flow QP fails and its lane fails over (7 is the "
               "most the hardware allows).",
               "an integer in [0, 7]", false, v::int_range(0, 7),
               [](Config& c, size_t, const Value& x) { c.peer.qp_retry_cnt = as<int64_t>(x); }});
  f.push_back({"peer", "discover", FieldType::kString, std::string(""),
               "Find peers through DNS, as on a Kubernetes headless Service: dns:NAME takes the A and AAAA records "
               "of NAME (port discover_port), dns-srv:NAME the SRV records (host and port, e.g. "
               "dns-srv:_rdmad._tcp.rdmad-peers.rdmad.svc.cluster.local). A discovered address is only a "
               "candidate: its node id is the one its authenticated hello proves, never the DNS name. Sessions to "
               "discovered nodes are opened when a flow or export names the node and closed after idle_session_ms "
               "without one; this node's own address is skipped. Combines with [[peers]], which stay dialled "
               "eagerly. Empty: no discovery.",
               "dns:NAME, dns-srv:NAME, or empty", false, v::discover_target(),
               [](Config& c, size_t, const Value& x) { c.peer.discover = as<std::string>(x); }});
  f.push_back({"peer", "discover_port", FieldType::kInt, kDefaultPeerPort,
               "TCP port of the peer channel at the addresses of a dns:NAME discover (SRV records carry their own).",
               "an integer in [1, 65535]", false, v::int_range(1, 65535),
               [](Config& c, size_t, const Value& x) { c.peer.discover_port = as<int64_t>(x); }});
  f.push_back({"peer", "discover_interval_ms", FieldType::kInt, int64_t{30000},
               "Milliseconds between DNS resolutions of discover; after a failed one it is retried after 1 s, "
               "doubling up to this interval, and the addresses of the last good answer are kept meanwhile. A "
               "record removed or added is noticed within this interval.",
               "an integer in [100, 3600000]", false, v::int_range(100, kMaxMs),
               [](Config& c, size_t, const Value& x) { c.peer.discover_interval_ms = as<int64_t>(x); }});
  f.push_back({"peer", "idle_session_ms", FieldType::kInt, int64_t{300000},
               "A session to a discovered node that carries no flow, export or grant on either side for this many "
               "milliseconds is closed (and opened again by the next flow to that node), so a large fleet does not "
               "hold a session to every node; [[peers]] sessions are never closed. 0: never close.",
               "an integer in [0, 86400000]", false, v::int_range(0, 86400000),
               [](Config& c, size_t, const Value& x) { c.peer.idle_session_ms = as<int64_t>(x); }});
  // [[peers]]
  auto node = [](Config& c, size_t i) -> PeerNodeSection& {
    if (c.peers.size() <= i) c.peers.resize(i + 1);
    return c.peers[i];
  };
  f.push_back({"peers", "node_id", FieldType::kString, std::monostate{},
               "The remote daemon's id (its [peer] node_id, or its host name if that is empty); a connection that "
               "presents another id is refused.",
               "a name of 1-64 letters, digits, '_', '.' or '-'", true, v::identifier(false),
               [node](Config& c, size_t i, const Value& x) { node(c, i).node_id = as<std::string>(x); }});
  f.push_back({"peers", "address", FieldType::kString, std::monostate{},
               "IP address and TCP port of the remote daemon's peer channel (its [peer] listen), e.g. "
               "10.0.0.2:18515 or [fd00::2]:18515.",
               "an IP address and port in [1, 65535]", true, v::peer_address(),
               [node](Config& c, size_t i, const Value& x) {
                 PeerNodeSection& n = node(c, i);
                 n.address = as<std::string>(x);
                 v::split_host_port(n.address, n.host, n.port);
               }});
}

void add_flow_fields(std::vector<Field>& f) {
  f.push_back({"flow", "policy", FieldType::kString, std::string("weighted"),
               "How chunks are spread over the lanes: weighted (in proportion to each lane's measured throughput), "
               "congestion_aware (weighted, lowered by the lane's CNP rate and capped by its DCQCN rate), "
               "round_robin (one chunk per lane in turn) or hash (each flow pinned to one lane; no striping).",
               "one of weighted, congestion_aware, round_robin, hash", false,
               v::one_of({"weighted", "congestion_aware", "round_robin", "hash"}),
               [](Config& c, size_t, const Value& x) { c.flow.policy = as<std::string>(x); }});
  f.push_back({"flow", "chunk_bytes", FieldType::kInt, int64_t{1048576},
               "Bytes per chunk, the unit a transfer is striped in (the last chunk may be shorter). Larger chunks cost "
               "less per byte; smaller ones balance lanes more finely and lose less on a failover.",
               "an integer in [4096, 1073741824]", false, v::int_range(4096, 1073741824),
               [](Config& c, size_t, const Value& x) { c.flow.chunk_bytes = as<int64_t>(x); }});
  f.push_back({"flow", "lane_window_chunks", FieldType::kInt, int64_t{8},
               "Chunks in flight per lane (local NIC) per peer; chunk_bytes x lane_window_chunks must cover the "
               "lane's bandwidth-delay product to keep it busy.",
               "an integer in [1, 1024]", false, v::int_range(1, 1024),
               [](Config& c, size_t, const Value& x) { c.flow.lane_window_chunks = as<int64_t>(x); }});
  f.push_back({"flow", "qps_per_lane", FieldType::kInt, int64_t{1},
               "RC queue pairs a lane (a local NIC to the peer's NIC of the same index) spreads its chunks over, each "
               "with its own DCQCN rate and UDP source port (ECMP path); a lane gets the smaller value of the two "
               "nodes, and lane_window_chunks stays the lane's total.",
               "an integer in [1, 16]; times the number of [[nic]] sections at most 255", false,
               v::int_range(1, kMaxQpsPerLane),
               [](Config& c, size_t, const Value& x) { c.flow.qps_per_lane = as<int64_t>(x); }});
  f.push_back({"flow", "sq_depth", FieldType::kInt, int64_t{256},
               "Send queue entries of each flow QP; raise it with lane_window_chunks so that a full window of work "
               "requests always fits.",
               "a power of two in [16, 65536]", false, v::power_of_two(16, 65536),
               [](Config& c, size_t, const Value& x) { c.flow.sq_depth = as<int64_t>(x); }});
  f.push_back({"flow", "cq_depth", FieldType::kInt, int64_t{512},
               "Completion queue entries of the flow QPs' completion queues; keep it at least as large as the work "
               "requests that can be outstanding on the QPs sharing one, or completions are lost.",
               "a power of two in [16, 65536]", false, v::power_of_two(16, 65536),
               [](Config& c, size_t, const Value& x) { c.flow.cq_depth = as<int64_t>(x); }});
  f.push_back({"flow", "max_flows_per_client", FieldType::kInt, int64_t{64},
               "Flows one client connection may have open at once; further opens are refused.",
               "an integer in [1, 4096]", false, v::int_range(1, 4096),
               [](Config& c, size_t, const Value& x) { c.flow.max_flows_per_client = as<int64_t>(x); }});
  f.push_back({"flow", "max_grants_per_peer", FieldType::kInt, int64_t{4096},
               "Memory grants (exports of the peer's clients to this node) one peer daemon may hold here at once; "
               "further grants are refused (the exporting client gets an error) and counted in "
               "rdmad_peer_messages_refused_total.",
               "an integer in [1, 1048576]", false, v::int_range(1, 1048576),
               [](Config& c, size_t, const Value& x) { c.flow.max_grants_per_peer = as<int64_t>(x); }});
  f.push_back({"flow", "max_receives_per_peer", FieldType::kInt, int64_t{4096},
               "Receive buffers posted on flows to one peer and not yet filled; further receives complete at once "
               "with RDMAD_ERR_NO_RESOURCE. A peer that advertises more receives than this to us is refused the "
               "same way; use the same value on every node.",
               "an integer in [1, 1048576]", false, v::int_range(1, 1048576),
               [](Config& c, size_t, const Value& x) { c.flow.max_receives_per_peer = as<int64_t>(x); }});
  f.push_back({"flow", "min_lane_fraction", FieldType::kDouble, 0.25,
               "Lanes slower than this fraction of the fastest are left out of striping (an occasional probe chunk "
               "measures them again); 0 keeps every lane, 1 only the fastest.",
               "a number in [0, 1]", false, v::double_range(0, 1),
               [](Config& c, size_t, const Value& x) { c.flow.min_lane_fraction = as<double>(x); }});
  f.push_back({"flow", "honour_pci_distance", FieldType::kBool, true,
               "Stripe a buffer only over the working NICs nearest to it in the PCI tree (a far NIC slows the near "
               "ones down); false uses every NIC whatever the distance.",
               "true or false", false, nullptr,
               [](Config& c, size_t, const Value& x) { c.flow.honour_pci_distance = as<bool>(x); }});
  f.push_back({"flow", "cnp_half_weight_per_s", FieldType::kDouble, 1000.0,
               "congestion_aware: rate of congestion notification packets (CNPs per second) at which a lane's weight "
               "is halved; lower reacts more strongly to congestion.",
               "a number > 0", false, v::positive_double(),
               [](Config& c, size_t, const Value& x) { c.flow.cnp_half_weight_per_s = as<double>(x); }});
  f.push_back({"flow", "rejoin_backoff_min_ms", FieldType::kInt, int64_t{100},
               "Milliseconds a failed lane waits after it recovers before it takes chunks again; the wait doubles "
               "each time the lane fails again, up to rejoin_backoff_max_ms.",
               "an integer in [1, 3600000]", false, v::int_range(1, kMaxMs),
               [](Config& c, size_t, const Value& x) { c.flow.rejoin_backoff_min_ms = as<int64_t>(x); }});
  f.push_back({"flow", "rejoin_backoff_max_ms", FieldType::kInt, int64_t{10000},
               "Longest rejoin wait in milliseconds of a lane that keeps failing (at least rejoin_backoff_min_ms); "
               "higher keeps a flapping link out longer.",
               "an integer in [1, 3600000], at least rejoin_backoff_min_ms", false, v::int_range(1, kMaxMs),
               [](Config& c, size_t, const Value& x) { c.flow.rejoin_backoff_max_ms = as<int64_t>(x); }});
}

std::vector<Field> make_fields() {
  std::vector<Field> f;
  // [daemon]
  f.push_back({"daemon", "runtime_dir", FieldType::kString, std::string("/run/rdmad"),
               "Directory for the daemon's runtime files (socket, state).", "an absolute path", false,
               v::absolute_path(), [](Config& c, size_t, const Value& x) { c.daemon.runtime_dir = as<std::string>(x); }});
  f.push_back({"daemon", "socket_path", FieldType::kString, std::string("/run/rdmad/rdmad.sock"),
               "Unix socket that local applications connect to through librdmad.", "an absolute path", false,
               v::absolute_path(), [](Config& c, size_t, const Value& x) { c.daemon.socket_path = as<std::string>(x); }});
  f.push_back({"daemon", "log_level", FieldType::kString, std::string("info"),
               "Log level (the RDMAD_LOG_LEVEL environment variable overrides it); changes apply on reload.",
               "one of trace, debug, info, warn, error, critical, off", false,
               v::one_of({"trace", "debug", "info", "warn", "error", "critical", "off"}),
               [](Config& c, size_t, const Value& x) { c.daemon.log_level = as<std::string>(x); }});
  f.push_back({"daemon", "sysfs_root", FieldType::kString, std::string("/"),
               "Directory that stands in for / when reading /sys and /sys/kernel/debug (a container that mounts "
               "the host's sysfs elsewhere sets it).",
               "an absolute path", false, v::absolute_path(),
               [](Config& c, size_t, const Value& x) { c.daemon.sysfs_root = as<std::string>(x); }});
  f.push_back({"daemon", "nic_poll_interval_ms", FieldType::kInt, int64_t{10000},
               "How often hardware NIC counters are sampled and congestion-control health is checked.",
               "an integer in [100, 3600000]", false, v::int_range(100, 3600000),
               [](Config& c, size_t, const Value& x) { c.daemon.nic_poll_interval_ms = as<int64_t>(x); }});
  f.push_back({"daemon", "embedded_nic_address", FieldType::kString, std::string("127.0.0.1"),
               "Without any [[nic]] table and without RDMA devices, the daemon runs one soft NIC (soft0) on this "
               "address: 127.0.0.1 serves local applications only (UDP port picked by the kernel); primary takes "
               "the first IPv4 address of an interface that is up and not loopback (UDP port 4791), so that peers "
               "can reach it. With RDMA devices and no [[nic]], every port found is a NIC and this is unused.",
               "an IP address, or primary", false,
               [](const Value& x) {
                 const auto& s = as<std::string>(x);
                 return s == "primary" || v::is_ip_address(s) ? "" : "an IP address, or primary";
               },
               [](Config& c, size_t, const Value& x) { c.daemon.embedded_nic_address = as<std::string>(x); }});
  // [metrics]
  f.push_back({"metrics", "listen", FieldType::kString, std::string("127.0.0.1:9842"),
               "Address and port of the HTTP endpoint serving /metrics.", "an IP address and port", false,
               v::listen_address(), [](Config& c, size_t, const Value& x) { c.metrics.listen = as<std::string>(x); }});
  f.push_back({"metrics", "labels", FieldType::kStringMap, StringMap{},
               "Constant labels of the rdmad_node_info series (e.g. { cluster = \"a\", rack = \"r7\" }); "
               "changes apply on reload.",
               "a table of Prometheus label names to strings", false, v::label_map(),
               [](Config& c, size_t, const Value& x) { c.metrics.labels = as<StringMap>(x); }});
  f.push_back({"metrics", "probe_timeout_ms", FieldType::kInt, int64_t{1000},
               "How long /healthz and /readyz (served beside /metrics) wait for the control loop to answer "
               "before they answer 503; keep it below the probe's timeoutSeconds. Changes apply on reload.",
               "an integer in [10, 60000]", false, v::int_range(10, 60000),
               [](Config& c, size_t, const Value& x) { c.metrics.probe_timeout_ms = as<int64_t>(x); }});
  // [cc]
  f.push_back({"cc", "profile", FieldType::kString, std::string("mlx5"),
               "DCQCN parameter profile: mlx5 (ConnectX firmware defaults) or paper (SIGCOMM'15).",
               "one of mlx5, paper", false, v::one_of({"mlx5", "paper"}),
               [](Config& c, size_t, const Value& x) { c.cc.profile = as<std::string>(x); }});
  f.push_back({"cc", "profile_file", FieldType::kString, std::string(""),
               "A DCQCN profile file, as rdmad-sim tune writes it (docs/tuning.md): its base profile and knobs "
               "replace profile (set one of the two), the knobs below still apply on top; a relative path is "
               "relative to this file's directory. Read at start-up with the same checks as this file (a regular "
               "file, not writable by everyone, owned by root or the daemon's user); errors name its line and key. "
               "Empty: none.",
               "a path to a profile file", false, nullptr,
               [](Config& c, size_t, const Value& x) { c.cc.profile_file = as<std::string>(x); }});
  for (const cc::Mlx5Knob& k : cc::mlx5_knobs()) {
    const std::string name(k.name);
    f.push_back({"cc", name, FieldType::kInt, std::monostate{},
                 fmt::format("{} [unit: {}; default: from the profile].", k.doc, k.unit),
                 fmt::format("an integer in [{}, {}]", k.min, k.max), false, v::int_range(k.min, k.max),
                 [name](Config& c, size_t, const Value& x) { c.cc.overrides[name] = as<int64_t>(x); }});
  }
  // [ipc]
  f.push_back({"ipc", "socket_mode", FieldType::kString, std::string("0660"),
               "Permissions of the client socket, in octal.", "an octal mode such as 0660", false, v::octal_mode(),
               [](Config& c, size_t, const Value& x) { c.ipc.socket_mode = as<std::string>(x); }});
  f.push_back({"ipc", "socket_group", FieldType::kString, std::string(""),
               "Group that owns the client socket (its members may connect), a name or a number; empty keeps the "
               "daemon's group. The socket is made with it where it can be without CAP_CHOWN (the daemon is a member, "
               "or the socket's directory is set-group-id to it); under systemd rdmad.socket's SocketGroup= sets it.",
               "a group name or number", false, v::identifier(true),
               [](Config& c, size_t, const Value& x) { c.ipc.socket_group = as<std::string>(x); }});
  f.push_back({"ipc", "admin_socket_path", FieldType::kString, std::string(""),
               "Unix socket for the operator's requests (rdmactl peers, flows, registrations, cc, reload, ...), mode "
               "0600, served to root and the daemon's uid only; empty: \"admin.sock\" in the directory of the client "
               "socket's directory name with \"-admin\" appended (/run/rdmad-admin/admin.sock for the default), so "
               "that mounting the client socket's directory into a container never exposes it.",
               "an absolute path outside the client socket's directory", false, v::absolute_path(true),
               [](Config& c, size_t, const Value& x) { c.ipc.admin_socket_path = as<std::string>(x); }});
  f.push_back({"ipc", "proc_root", FieldType::kString, std::string("/proc"),
               "Where a client's /proc/<pid>/cgroup is read at connect time to name its tenant (its Kubernetes "
               "pod, else its uid); tests point it at a fixture tree.",
               "an absolute path", false, v::absolute_path(),
               [](Config& c, size_t, const Value& x) { c.ipc.proc_root = as<std::string>(x); }});
  f.push_back({"ipc", "allowed_uids", FieldType::kIntList, IntList{},
               "User ids allowed to use the service besides root; with allowed_gids also empty, anyone who can open "
               "the socket may.",
               "an array of uids", false, v::id_list(),
               [](Config& c, size_t, const Value& x) { c.ipc.allowed_uids = as<IntList>(x); }});
  f.push_back({"ipc", "allowed_gids", FieldType::kIntList, IntList{},
               "Group ids (primary or supplementary) allowed to use the service.", "an array of gids", false,
               v::id_list(), [](Config& c, size_t, const Value& x) { c.ipc.allowed_gids = as<IntList>(x); }});
  f.push_back({"ipc", "max_clients", FieldType::kInt, int64_t{16384}, "Most client connections served at once.",
               "an integer in [1, 1000000]", false, v::int_range(1, 1000000),
               [](Config& c, size_t, const Value& x) { c.ipc.max_clients = as<int64_t>(x); }});
  f.push_back({"ipc", "workers", FieldType::kInt, int64_t{0},
               "Threads serving client connections (a new one goes to the least loaded); 0 means min(4, hardware "
               "threads). As many bulk threads serve large registrations (1 MiB and more, and every dma-buf "
               "one). Flow and operator requests are still served on the control thread.",
               "an integer in [0, 64]", false, v::int_range(0, 64),
               [](Config& c, size_t, const Value& x) { c.ipc.workers = as<int64_t>(x); }});
  f.push_back({"ipc", "quota_pinned_bytes", FieldType::kInt, int64_t{17179869184},
               "Bytes of memory one uid may have registered (pinned) at once, unless a [[quota]] says otherwise.",
               "an integer in [0, 2^62]", false, v::int_range(0, int64_t{1} << 62),
               [](Config& c, size_t, const Value& x) { c.ipc.quota_pinned_bytes = as<int64_t>(x); }});
  f.push_back({"ipc", "quota_registrations", FieldType::kInt, int64_t{4096},
               "Registrations one uid may hold at once, unless a [[quota]] says otherwise.",
               "an integer in [0, 4294967295]", false, v::int_range(0, 4294967295LL),
               [](Config& c, size_t, const Value& x) { c.ipc.quota_registrations = as<int64_t>(x); }});
  f.push_back({"ipc", "quota_connections", FieldType::kInt, int64_t{1024},
               "Client connections one uid may have open at once, unless a [[quota]] says otherwise; further ones "
               "are refused with an error (each connection costs the daemon a file descriptor).",
               "an integer in [1, 1000000]", false, v::int_range(1, 1000000),
               [](Config& c, size_t, const Value& x) { c.ipc.quota_connections = as<int64_t>(x); }});
  f.push_back({"ipc", "quota_flows", FieldType::kInt, int64_t{1024},
               "Flows one uid's connections may have open at once (each also within [flow] max_flows_per_client), "
               "unless a [[quota]] says otherwise.",
               "an integer in [0, 1000000]", false, v::int_range(0, 1000000),
               [](Config& c, size_t, const Value& x) { c.ipc.quota_flows = as<int64_t>(x); }});
  f.push_back({"ipc", "quota_exports", FieldType::kInt, int64_t{4096},
               "Exports one uid's connections may hold at once, unless a [[quota]] says otherwise.",
               "an integer in [0, 1000000]", false, v::int_range(0, 1000000),
               [](Config& c, size_t, const Value& x) { c.ipc.quota_exports = as<int64_t>(x); }});
  f.push_back({"ipc", "nic_table_share_percent", FieldType::kInt, int64_t{25},
               "Share of a NIC's memory-region table one uid's registrations may fill, whatever its registration "
               "quota: no user can take a NIC's table from the others (the soft backend's table is finite too).",
               "an integer in [1, 100]", false, v::int_range(1, 100),
               [](Config& c, size_t, const Value& x) { c.ipc.nic_table_share_percent = as<int64_t>(x); }});
  f.push_back({"ipc", "hello_timeout_ms", FieldType::kInt, int64_t{5000},
               "A client connection that has not said hello within this many milliseconds is closed.",
               "an integer in [10, 3600000]", false, v::int_range(10, kMaxMs),
               [](Config& c, size_t, const Value& x) { c.ipc.hello_timeout_ms = as<int64_t>(x); }});
  f.push_back({"ipc", "resume_grace_ms", FieldType::kInt, int64_t{60000},
               "After a restart, how long the daemon keeps each client session's registrations and exports of "
               "its previous run for the client to take back (librdmad does when it reconnects); what is not "
               "taken back by then is released. Needs a keeper of the registered memory's descriptors: "
               "systemd's file-descriptor store (FileDescriptorStoreMax= in rdmad.service) or a supervisor "
               "speaking the same protocol ($NOTIFY_SOCKET); without one, or with 0, a restart releases "
               "everything as a stop does.",
               "an integer in [0, 3600000]", false, v::int_range(0, kMaxMs),
               [](Config& c, size_t, const Value& x) { c.ipc.resume_grace_ms = as<int64_t>(x); }});
  f.push_back({"ipc", "idle_timeout_ms", FieldType::kInt, int64_t{300000},
               "A client connection that holds nothing (no registration, no flow) and has sent nothing for this "
               "many milliseconds is closed (the library reconnects on its next call); 0 never closes one.",
               "an integer in [0, 86400000]", false, v::int_range(0, 86400000),
               [](Config& c, size_t, const Value& x) { c.ipc.idle_timeout_ms = as<int64_t>(x); }});
  // [[quota]]
  auto quota = [](Config& c, size_t i) -> QuotaSection& {
    if (c.quotas.size() <= i) c.quotas.resize(i + 1);
    return c.quotas[i];
  };
  f.push_back({"quota", "uid", FieldType::kInt, std::monostate{},
               "The user id this quota applies to (its connections from outside any Kubernetes pod); a [[quota]] "
               "names uid or pod_uid.",
               "an integer in [0, 4294967294]", false, v::int_range(0, 4294967294LL),
               [quota](Config& c, size_t i, const Value& x) { quota(c, i).uid = as<int64_t>(x); }});
  f.push_back({"quota", "pod_uid", FieldType::kString, std::monostate{},
               "The Kubernetes pod (metadata.uid) this quota applies to, whatever uids its containers run as; a pod "
               "without one gets the [ipc] defaults, not its uid's [[quota]].",
               "a pod UID such as \"8f2c6a8e-1b5d-4c3e-9a7f-0d1e2f3a4b5c\"", false, v::pod_uid(),
               [quota](Config& c, size_t i, const Value& x) { quota(c, i).pod_uid = as<std::string>(x); }});
  f.push_back({"quota", "pinned_bytes", FieldType::kInt, int64_t{17179869184},
               "Bytes this uid may have registered at once.", "an integer in [0, 2^62]", false,
               v::int_range(0, int64_t{1} << 62),
               [quota](Config& c, size_t i, const Value& x) { quota(c, i).pinned_bytes = as<int64_t>(x); }});
  f.push_back({"quota", "registrations", FieldType::kInt, int64_t{4096}, "Registrations this uid may hold at once.",
               "an integer in [0, 4294967295]", false, v::int_range(0, 4294967295LL),
               [quota](Config& c, size_t i, const Value& x) { quota(c, i).registrations = as<int64_t>(x); }});
  f.push_back({"quota", "connections", FieldType::kInt, int64_t{1024}, "Client connections this uid may have open at once.",
               "an integer in [1, 1000000]", false, v::int_range(1, 1000000),
               [quota](Config& c, size_t i, const Value& x) { quota(c, i).connections = as<int64_t>(x); }});
  f.push_back({"quota", "flows", FieldType::kInt, int64_t{1024}, "Flows this uid may have open at once.",
               "an integer in [0, 1000000]", false, v::int_range(0, 1000000),
               [quota](Config& c, size_t i, const Value& x) { quota(c, i).flows = as<int64_t>(x); }});
  f.push_back({"quota", "exports", FieldType::kInt, int64_t{4096}, "Exports this uid may hold at once.",
               "an integer in [0, 1000000]", false, v::int_range(0, 1000000),
               [quota](Config& c, size_t i, const Value& x) { quota(c, i).exports = as<int64_t>(x); }});
  // [[nic]]
  auto nic = [](Config& c, size_t i) -> NicSection& {
    if (c.nics.size() <= i) c.nics.resize(i + 1);
    return c.nics[i];
  };
  f.push_back({"nic", "name", FieldType::kString, std::monostate{},
               "Name of the NIC in logs, metrics (label nic) and the client API.", "a name", true,
               v::identifier(false), [nic](Config& c, size_t i, const Value& x) { nic(c, i).name = as<std::string>(x); }});
  f.push_back({"nic", "backend", FieldType::kString, verbs::default_builtin_backend().name,
               "Transport backend: soft (RoCEv2 over UDP in software), rdma_core (a verbs NIC) or, in builds with DPDK, "
               "dpdk (the soft backend's RoCEv2 over a DPDK port).",
               backend_choices(), false, v::one_of(backend_names()),
               [nic](Config& c, size_t i, const Value& x) { nic(c, i).backend = as<std::string>(x); }});
  f.push_back({"nic", "address", FieldType::kString, std::string(""),
               "IP address of the NIC (required for soft and dpdk). For rdma_core it selects the RoCEv2 GID of that "
               "address (re-selected when addresses change; an address the port does not have leaves the NIC "
               "without a source GID); it cannot be combined with gid_index, and must lie in gid_match when both "
               "are set.",
               "an IPv4 or IPv6 address", false, v::ip_address(true),
               [nic](Config& c, size_t i, const Value& x) { nic(c, i).address = as<std::string>(x); }});
  f.push_back({"nic", "device", FieldType::kString, std::string(""),
               "rdma-core device name, as in /sys/class/infiniband (required for rdma_core).", "a device name",
               false, v::identifier(true),
               [nic](Config& c, size_t i, const Value& x) { nic(c, i).device = as<std::string>(x); }});
  f.push_back({"nic", "gid_match", FieldType::kString, std::string(""),
               "rdma_core: CIDR the automatically selected GID's address must lie in (e.g. 10.1.0.0/16); empty "
               "accepts any.",
               "a CIDR such as 10.1.0.0/16 or fd00::/8", false, v::cidr(true),
               [nic](Config& c, size_t i, const Value& x) { nic(c, i).gid_match = as<std::string>(x); }});
  f.push_back({"nic", "cc_apply", FieldType::kBool, false,
               "rdma_core: write the [cc] parameters to the NIC's DCQCN at start-up and report any value it did not "
               "take; false only reads and reports them.",
               "true or false", false, nullptr,
               [nic](Config& c, size_t i, const Value& x) { nic(c, i).cc_apply = as<bool>(x); }});
  f.push_back({"nic", "roce_priority", FieldType::kInt, int64_t{3},
               "802.1p priority that carries RoCE traffic; congestion control disabled on it is reported as a "
               "misconfiguration.",
               "an integer in [0, 7]", false, v::int_range(0, 7),
               [nic](Config& c, size_t i, const Value& x) { nic(c, i).roce_priority = as<int64_t>(x); }});
  f.push_back({"nic", "cnp_dscp", FieldType::kInt, int64_t{-1},
               "DSCP of the congestion notification packets this NIC sends: the soft backend's CNPs, and for "
               "rdma_core the NIC's np_cnp_dscp knob where cc_apply writes it; -1 takes [cc] cnp_dscp.",
               "an integer in [-1, 63]", false, v::int_range(-1, 63),
               [nic](Config& c, size_t i, const Value& x) { nic(c, i).cnp_dscp = as<int64_t>(x); }});
  f.push_back({"nic", "advertise_address", FieldType::kString, std::string(""),
               "soft: IP address that peers send this NIC's traffic to instead of address, for a NIC behind a NAT or "
               "a fabric emulator port in front of it; empty advertises address. Such a relay forwards from this "
               "address and advertise_udp_port, so the NIC's QPs accept packets from exactly that source besides their "
               "peers'; rdmad-fabric re-seals the ICRC of what it forwards, and the NIC verifies every packet. "
               "Ignored by other backends.",
               "an IPv4 or IPv6 address, or empty", false, v::ip_address(true),
               [nic](Config& c, size_t i, const Value& x) { nic(c, i).advertise_address = as<std::string>(x); }});
  f.push_back({"nic", "advertise_udp_port", FieldType::kInt, int64_t{0},
               "soft: UDP port that peers send this NIC's traffic to, with advertise_address; 0 advertises udp_port. "
               "With advertise_address, also the relay's source port the NIC accepts. Ignored by other backends.",
               "an integer in [0, 65535] (0: udp_port)", false, v::int_range(0, 65535),
               [nic](Config& c, size_t i, const Value& x) { nic(c, i).advertise_udp_port = as<int64_t>(x); }});
  add_backend_option_fields(f);
  add_peer_fields(f);
  add_flow_fields(f);
  return f;
}

}  // namespace

std::span<const Section> sections() {
  static const std::vector<Section> s = make_sections();
  return s;
}

std::span<const Field> fields() {
  static const std::vector<Field> f = make_fields();
  return f;
}

const char* type_name(FieldType t) {
  switch (t) {
    case FieldType::kString: return "string";
    case FieldType::kInt: return "integer";
    case FieldType::kBool: return "boolean";
    case FieldType::kStringMap: return "table of strings";
    case FieldType::kIntList: return "array of integers";
    case FieldType::kDouble: return "number";
  }
  return "?";
}

std::string to_toml(const Value& v) {
  struct Visitor {
    std::string operator()(std::monostate) const { return ""; }
    std::string operator()(const std::string& s) const {
      std::string out = "\"";
      for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
      }
      return out + "\"";
    }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(double d) const {
      std::string out = fmt::format("{}", d);
      if (out.find_first_of(".eEn") == std::string::npos) out += ".0";  // "1000" would read back as an integer
      return out;
    }
    std::string operator()(const IntList& l) const { return fmt::format("[{}]", fmt::join(l, ", ")); }
    std::string operator()(const StringMap& m) const {
      if (m.empty()) return "{}";
      std::vector<std::string> parts;
      for (const auto& [k, val] : m) parts.push_back(k + " = " + (*this)(val));
      return fmt::format("{{ {} }}", fmt::join(parts, ", "));
    }
  };
  return std::visit(Visitor{}, v);
}

}  // namespace rdmad::config
