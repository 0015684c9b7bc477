#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "rdmad/config/field.h"
#include "rdmad/config/loader.h"
#include "rdmad/verbs/builtin_backends.h"

namespace rdmad::config {
namespace {

namespace fs = std::filesystem;
const fs::path kData = fs::path(RDMAD_SOURCE_DIR) / "tests/data/config";

// A loaded section's backend option (every option of the built-in backends has a value there).
int64_t int_option(const NicSection& n, std::string_view name) {
  const auto v = n.backend_option(name);
  return v && std::holds_alternative<int64_t>(*v) ? std::get<int64_t>(*v) : -999;
}
bool bool_option(const NicSection& n, std::string_view name) {
  const auto v = n.backend_option(name);
  if (!v || !std::holds_alternative<bool>(*v)) ADD_FAILURE() << name << " is not a boolean option";
  return v && std::holds_alternative<bool>(*v) && std::get<bool>(*v);
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string all_errors(const LoadResult& r) {
  std::string s;
  for (const auto& e : r.errors) s += e.to_string() + "\n";
  return s;
}

TEST(Config, DefaultIsValidAndMatchesDocumentedDefaults) {
  const LoadResult r = load_string("", "<empty>");
  ASSERT_TRUE(r.ok()) << all_errors(r);
  const Config& c = r.config;
  EXPECT_EQ(c.daemon.runtime_dir, "/run/rdmad");
  EXPECT_EQ(c.daemon.socket_path, "/run/rdmad/rdmad.sock");
  EXPECT_EQ(c.daemon.log_level, "info");
  EXPECT_EQ(c.metrics.listen, "127.0.0.1:9842");
  EXPECT_EQ(c.cc.profile, "mlx5");
  EXPECT_EQ(c.cc.params, cc::mlx5_profile());
  EXPECT_TRUE(c.nics.empty());
}

TEST(Config, PeerAndFlowDefaults) {
  const Config c = default_config();
  EXPECT_FALSE(c.peer.enabled);
  EXPECT_EQ(c.peer.node_id, "");  // the daemon fills in the host name
  EXPECT_EQ(c.peer.listen, "");  // the first [[nic]] address when the channel is on
  EXPECT_EQ(c.peer.listen_host, "");
  EXPECT_EQ(c.peer.listen_port, 18515);
  EXPECT_EQ(c.peer.key_file, "");
  EXPECT_EQ(c.peer.tls_ca_file, "");
  EXPECT_EQ(c.peer.tls_cert_file, "");
  EXPECT_EQ(c.peer.tls_key_file, "");
  EXPECT_EQ(c.peer.tls_san_uri_prefix, "");
  EXPECT_FALSE(c.peer.insecure);
  EXPECT_EQ(c.peer.handshake_timeout_ms, 5000);
  EXPECT_EQ(c.peer.max_handshakes, 64);
  EXPECT_EQ(c.peer.max_handshakes_per_source, 8);
  EXPECT_EQ(c.peer.send_queue_bytes, 4 << 20);
  EXPECT_EQ(c.peer.keepalive_interval_ms, 1000);
  EXPECT_EQ(c.peer.keepalive_misses, 3);
  EXPECT_EQ(c.peer.reconnect_min_ms, 100);
  EXPECT_EQ(c.peer.reconnect_max_ms, 30000);
  EXPECT_EQ(c.peer.qp_timeout, 14);
  EXPECT_EQ(c.peer.qp_retry_cnt, 7);
  EXPECT_TRUE(c.peers.empty());
  EXPECT_EQ(c.flow.policy, "weighted");
  EXPECT_EQ(c.flow.chunk_bytes, 1048576);
  EXPECT_EQ(c.flow.lane_window_chunks, 8);
  EXPECT_EQ(c.flow.qps_per_lane, 1);
  EXPECT_EQ(c.flow.sq_depth, 256);
  EXPECT_EQ(c.flow.cq_depth, 512);
  EXPECT_EQ(c.flow.max_flows_per_client, 64);
  EXPECT_EQ(c.flow.min_lane_fraction, 0.25);
  EXPECT_TRUE(c.flow.honour_pci_distance);
  EXPECT_EQ(c.flow.cnp_half_weight_per_s, 1000.0);
  EXPECT_EQ(c.flow.rejoin_backoff_min_ms, 100);
  EXPECT_EQ(c.flow.rejoin_backoff_max_ms, 10000);
  // The loader's defaults are the structs' own (a Config built in code behaves like an empty file).
  EXPECT_EQ(c.peer, PeerSection{});
  EXPECT_EQ(c.flow, FlowSection{});
}

TEST(Config, NicAdvertiseDefaultsPerEntry) {
  const LoadResult r = load_string(
      "[[nic]]\nname = \"a\"\nbackend = \"soft\"\naddress = \"127.0.0.1\"\nadvertise_address = \"::1\"\n"
      "advertise_udp_port = 1\n[[nic]]\nname = \"b\"\nbackend = \"soft\"\naddress = \"127.0.0.2\"\n",
      "nic.toml");
  ASSERT_TRUE(r.ok()) << all_errors(r);
  ASSERT_EQ(r.config.nics.size(), 2u);
  EXPECT_EQ(r.config.nics[0].advertise_address, "::1");
  EXPECT_EQ(r.config.nics[0].advertise_udp_port, 1);
  EXPECT_EQ(r.config.nics[1].advertise_address, "");
  EXPECT_EQ(r.config.nics[1].advertise_udp_port, 0);
  // operator== sees the new keys (the daemon's reload reports a changed [[nic]] entry).
  NicSection changed = r.config.nics[1];
  changed.advertise_udp_port = 9;
  EXPECT_FALSE(changed == r.config.nics[1]);
}

// The per-NIC RoCE marking and service level, and an rdma_core NIC's address as its GID rule.
TEST(Config, NicDscpSlAndRdmaCoreAddress) {
  const LoadResult r = load_string(
      "[[nic]]\nname = \"a\"\ndevice = \"mlx5_0\"\naddress = \"10.1.0.7\"\ngid_match = \"10.1.0.0/16\"\n"
      "dscp = 46\ncnp_dscp = 48\nsl = 3\n[[nic]]\nname = \"b\"\nbackend = \"soft\"\naddress = \"127.0.0.2\"\n",
      "nic.toml");
  ASSERT_TRUE(r.ok()) << all_errors(r);
  EXPECT_EQ(int_option(r.config.nics[0], "dscp"), 46);
  EXPECT_EQ(r.config.nics[0].cnp_dscp, 48);
  EXPECT_EQ(int_option(r.config.nics[0], "sl"), 3);
  EXPECT_EQ(r.config.nics[0].address, "10.1.0.7");
  EXPECT_EQ(int_option(r.config.nics[1], "dscp"), 26) << "the default";
  EXPECT_EQ(r.config.nics[1].cnp_dscp, -1) << "the default: [cc] cnp_dscp";
  EXPECT_EQ(int_option(r.config.nics[1], "sl"), 0);
  const LoadResult v6 = load_string(
      "[[nic]]\nname = \"a\"\ndevice = \"mlx5_0\"\naddress = \"fd00::7\"\ngid_match = \"fd00::/8\"\n", "v6.toml");
  EXPECT_TRUE(v6.ok()) << all_errors(v6);
  const LoadResult family = load_string(
      "[[nic]]\nname = \"a\"\ndevice = \"mlx5_0\"\naddress = \"fd00::7\"\ngid_match = \"10.0.0.0/8\"\n", "f.toml");
  EXPECT_FALSE(family.ok()) << "an IPv6 address is in no IPv4 prefix";
}

// The backends' options are [[nic]] keys, checked at load against the backend's table: an error
// names file:line, nic[i].key and what was expected.
TEST(Config, BackendOptionKeysAreCheckedAgainstTheirTables) {
  const LoadResult ok = load_string(
      "[[nic]]\nname = \"s\"\nbackend = \"soft\"\naddress = \"127.0.0.2\"\nbusy_poll_us = 20\ncc_enabled = false\n",
      "opt.toml");
  ASSERT_TRUE(ok.ok()) << all_errors(ok);
  EXPECT_EQ(int_option(ok.config.nics[0], "busy_poll_us"), 20);
  EXPECT_FALSE(bool_option(ok.config.nics[0], "cc_enabled"));
  EXPECT_EQ(int_option(ok.config.nics[0], "line_rate_mbps"), 100000) << "the table's default";
  const LoadResult range = load_string(
      "[[nic]]\nname = \"s\"\nbackend = \"soft\"\naddress = \"127.0.0.2\"\nline_rate_mbps = 0\n", "opt.toml");
  ASSERT_EQ(range.errors.size(), 1u) << all_errors(range);
  EXPECT_EQ(range.errors[0].to_string().rfind("opt.toml:5:", 0), 0u) << range.errors[0].to_string();
  EXPECT_EQ(range.errors[0].key, "nic[0].line_rate_mbps");
  EXPECT_NE(range.errors[0].message.find("[1, 1000000]"), std::string::npos) << range.errors[0].message;
  const LoadResult type = load_string(
      "[[nic]]\nname = \"r\"\ndevice = \"mlx5_0\"\n[[nic]]\nname = \"s\"\ndevice = \"mlx5_1\"\ngid_ipv6 = 1\n",
      "opt.toml");
  ASSERT_EQ(type.errors.size(), 1u) << all_errors(type);
  EXPECT_EQ(type.errors[0].line, 7u);
  EXPECT_EQ(type.errors[0].key, "nic[1].gid_ipv6");
}

TEST(Config, PrintedDefaultConfigRoundTrips) {
  const std::string text = render_default_config();
  const LoadResult r = load_string(text, "<printed>");
  ASSERT_TRUE(r.ok()) << all_errors(r) << text;
  EXPECT_EQ(r.config.daemon.log_level, default_config().daemon.log_level);
  EXPECT_EQ(r.config.metrics.listen, default_config().metrics.listen);
  EXPECT_EQ(r.config.cc.params, default_config().cc.params);
  EXPECT_EQ(r.config.peer, default_config().peer);
  EXPECT_EQ(r.config.flow, default_config().flow);
  EXPECT_TRUE(r.config.peers.empty());
  // Every field of the table appears in the printed file.
  for (const Field& f : fields()) EXPECT_NE(text.find(f.name + " = "), std::string::npos) << f.path();
}

TEST(Config, FullFileSetsEverySection) {
  // The credential files it names are on an operator's host, not here: only the text is checked.
  const LoadResult r = load_file((kData / "valid/full.toml").string(), {.check_files = false});
  ASSERT_TRUE(r.ok()) << all_errors(r);
  const Config& c = r.config;
  EXPECT_EQ(c.daemon.log_level, "debug");
  EXPECT_EQ(c.metrics.listen, "[::1]:9842");
  EXPECT_EQ(c.metrics.labels.at("rack"), "r7");
  cc::DcqcnParams want = cc::paper_profile();
  want.increase_timer_us = 110;
  want.alpha_gain = 4.0 / 1024;
  EXPECT_EQ(c.cc.params, want);
  ASSERT_EQ(c.nics.size(), 2u);
  EXPECT_EQ(c.nics[0].name, "soft0");
  EXPECT_EQ(c.nics[0].udp_port, 0);
  EXPECT_EQ(c.nics[1].backend, "rdma_core");
  EXPECT_EQ(c.nics[1].device, "mlx5_0");
  EXPECT_EQ(c.nics[1].port, 1);
  EXPECT_EQ(c.nics[1].udp_port, 4791);  // per-entry default
  EXPECT_EQ(c.nics[0].advertise_address, "10.9.0.1");
  EXPECT_EQ(c.nics[0].advertise_udp_port, 14791);
  EXPECT_EQ(c.nics[1].advertise_address, "");
  EXPECT_EQ(c.nics[1].advertise_udp_port, 0);
  EXPECT_FALSE(bool_option(c.nics[0], "udp_offload"));
  EXPECT_TRUE(bool_option(c.nics[1], "udp_offload"));  // per-entry default
  EXPECT_EQ(int_option(c.nics[0], "source_ports"), 2);
  EXPECT_EQ(int_option(c.nics[1], "source_ports"), 8);

  EXPECT_TRUE(c.peer.enabled);
  EXPECT_EQ(c.peer.node_id, "gpu-node-01.rack7");
  EXPECT_EQ(c.peer.listen, "[::]:0");
  EXPECT_EQ(c.peer.listen_host, "::");
  EXPECT_EQ(c.peer.listen_port, 0);
  EXPECT_EQ(c.peer.key_file, "/etc/rdmad/peer.key");
  EXPECT_EQ(c.peer.keepalive_interval_ms, 250);
  EXPECT_EQ(c.peer.keepalive_misses, 5);
  EXPECT_EQ(c.peer.reconnect_min_ms, 50);
  EXPECT_EQ(c.peer.reconnect_max_ms, 50);  // equal bounds are allowed
  EXPECT_EQ(c.peer.qp_timeout, 18);
  EXPECT_EQ(c.peer.qp_retry_cnt, 3);
  ASSERT_EQ(c.peers.size(), 2u);
  EXPECT_EQ(c.peers[0], (PeerNodeSection{"gpu-node-02.rack7", "10.0.0.2:18515", "10.0.0.2", 18515}));
  EXPECT_EQ(c.peers[1], (PeerNodeSection{"gpu-node-03.rack7", "[fd00::3]:18516", "fd00::3", 18516}));

  EXPECT_EQ(c.flow.policy, "congestion_aware");
  EXPECT_EQ(c.flow.chunk_bytes, 65536);
  EXPECT_EQ(c.flow.lane_window_chunks, 32);
  EXPECT_EQ(c.flow.qps_per_lane, 4);
  EXPECT_EQ(c.flow.sq_depth, 1024);
  EXPECT_EQ(c.flow.cq_depth, 2048);
  EXPECT_EQ(c.flow.max_flows_per_client, 8);
  EXPECT_EQ(c.flow.min_lane_fraction, 0.0);  // an integer is accepted for a number
  EXPECT_FALSE(c.flow.honour_pci_distance);
  EXPECT_EQ(c.flow.cnp_half_weight_per_s, 250.5);
  EXPECT_EQ(c.flow.rejoin_backoff_min_ms, 10);
  EXPECT_EQ(c.flow.rejoin_backoff_max_ms, 10);
}

// Loads `text` and returns its errors as "line key: message" lines.
std::string errors_of(const std::string& text) {
  const LoadResult r = load_string(text, "t.toml");
  std::string s;
  for (const auto& e : r.errors) s += fmt::format("{} {}: {}\n", e.line, e.key, e.message);
  return s;
}

bool has_error(const std::string& text, const std::string& part) {
  return errors_of(text).find(part) != std::string::npos;
}

// The peer channel on, credentials aside (insecure) and an address to listen on: lines 1-4.
const std::string kPeerOn = "[peer]\nenabled = true\ninsecure = true\nlisten = \"10.0.0.1:1\"\n";

// A file with the peer channel on and one [[peers]] entry (its address on line 7).
std::string with_peer(const std::string& node_id, const std::string& address) {
  return fmt::format("{}[[peers]]\nnode_id = \"{}\"\naddress = \"{}\"\n", kPeerOn, node_id, address);
}

TEST(Config, PeerListenAndAddressesParse) {
  struct Case {
    const char* listen;
    const char* host;
    int64_t port;
  };
  for (const Case& k : {Case{"127.0.0.1:1", "127.0.0.1", 1}, Case{"[::1]:65535", "::1", 65535},
                        Case{"10.1.2.3:0", "10.1.2.3", 0}, Case{"[fe80::1%2]:7", "", 0}}) {
    const LoadResult r = load_string(fmt::format("[peer]\nlisten = \"{}\"\n", k.listen), "t.toml");
    if (*k.host == '\0') {  // a scoped v6 literal is not accepted by inet_pton
      EXPECT_FALSE(r.ok()) << k.listen;
      continue;
    }
    ASSERT_TRUE(r.ok()) << k.listen << all_errors(r);
    EXPECT_EQ(r.config.peer.listen, k.listen);
    EXPECT_EQ(r.config.peer.listen_host, k.host);
    EXPECT_EQ(r.config.peer.listen_port, k.port);
  }
  for (const char* bad : {"host:18515", "10.0.0.1", "10.0.0.1:", ":18515", "[::1]18515", "::1:18515",
                          "10.0.0.1:-1", "10.0.0.1:65536", "10.0.0.1:1x"}) {
    EXPECT_TRUE(has_error(fmt::format("[peer]\nlisten = \"{}\"\n", bad), "2 peer.listen: invalid value")) << bad;
    EXPECT_TRUE(has_error(with_peer("n", bad), "7 peers[0].address: invalid value")) << bad;
  }
  // A peer's port 0 means nothing to dial.
  EXPECT_TRUE(has_error(with_peer("n", "[::1]:0"), "port in [1, 65535]"));
}

TEST(Config, NodeIdsAreNamesOfAtMost64Bytes) {
  const std::string ok64(64, 'a');
  EXPECT_EQ(errors_of("[peer]\nnode_id = \"" + ok64 + "\"\n"), "");
  EXPECT_EQ(errors_of("[peer]\nnode_id = \"A-z_0.9\"\n"), "");
  for (const std::string& bad : {ok64 + "b", std::string("a b"), std::string("n/1"), std::string("n\\u00e9")}) {
    EXPECT_TRUE(has_error("[peer]\nnode_id = \"" + bad + "\"\n", "peer.node_id: invalid value")) << bad;
    EXPECT_TRUE(has_error(with_peer(bad, "10.0.0.2:1"), "peers[0].node_id: invalid value")) << bad;
  }
  // [[peers]] node_id may not be empty (it names a remote node); [peer] node_id may (the host name).
  EXPECT_TRUE(has_error(with_peer("", "10.0.0.2:1"), "peers[0].node_id: invalid value"));
}

TEST(Config, PeerCrossKeyRules) {
  const std::string peers = "[[peers]]\nnode_id = \"b\"\naddress = \"10.0.0.2:1\"\n";
  // [[peers]] needs the channel on.
  EXPECT_EQ(errors_of(peers), "1 peers: [[peers]] is listed but the peer channel is off: set enabled = true in [peer]\n");
  EXPECT_EQ(errors_of(kPeerOn + peers), "");
  // Its own id is refused only when [peer] node_id is set (an empty one is the host name, unknown here).
  EXPECT_EQ(errors_of(kPeerOn + "node_id = \"b\"\n" + peers),
            "7 peers[0].node_id: 'b' is this node's own [peer] node_id; list only other nodes\n");
  EXPECT_EQ(errors_of(kPeerOn + "node_id = \"a\"\n" + peers), "");
  // Every node once.
  EXPECT_EQ(errors_of(kPeerOn + peers + peers + "[[peers]]\nnode_id = \"c\"\naddress = \"10.0.0.3:1\"\n" + peers),
            "9 peers[1].node_id: duplicate peer node_id 'b' (also peers[0])\n"
            "15 peers[3].node_id: duplicate peer node_id 'b' (also peers[0])\n");
  // reconnect_max_ms >= reconnect_min_ms, named at the key the file sets.
  EXPECT_EQ(errors_of("[peer]\nreconnect_min_ms = 30001\n"),
            "2 peer.reconnect_min_ms: reconnect_max_ms (30000) must be at least reconnect_min_ms (30001)\n");
  EXPECT_EQ(errors_of("[peer]\nreconnect_min_ms = 10\nreconnect_max_ms = 9\n"),
            "3 peer.reconnect_max_ms: reconnect_max_ms (9) must be at least reconnect_min_ms (10)\n");
  EXPECT_EQ(errors_of("[peer]\nreconnect_min_ms = 30000\n"), "");
}

TEST(Config, PeerDiscover) {
  // dns:NAME and dns-srv:NAME with NAME a DNS name; errors name the line and the key.
  EXPECT_EQ(errors_of(kPeerOn + "discover = \"dns:rdmad-peers.rdmad.svc.cluster.local\"\n"), "");
  EXPECT_EQ(errors_of(kPeerOn + "discover = \"dns-srv:_rdmad._tcp.rdmad-peers.rdmad.svc.cluster.local.\"\n"), "");
  EXPECT_TRUE(has_error(kPeerOn + "discover = \"rdmad-peers\"\n", "5 peer.discover: invalid value"));
  EXPECT_TRUE(has_error(kPeerOn + "discover = \"srv:rdmad-peers\"\n", "dns:NAME (A/AAAA records) or dns-srv:NAME"));
  for (const std::string& bad : {std::string("dns:"), std::string("dns:a..b"), std::string("dns:a b"),
                                  std::string("dns-srv:") + std::string(64, 'x') + ".svc", std::string("dns:a/b")})
    EXPECT_TRUE(has_error(kPeerOn + "discover = \"" + bad + "\"\n", "5 peer.discover: invalid value")) << bad;
  // Discovery needs the channel on.
  EXPECT_EQ(errors_of("[peer]\ndiscover = \"dns:peers.test\"\n"),
            "2 peer.discover: discover is set but the peer channel is off: set enabled = true in [peer]\n");
  EXPECT_TRUE(has_error(kPeerOn + "discover_port = 0\n", "5 peer.discover_port: invalid value"));
  EXPECT_TRUE(has_error(kPeerOn + "discover_interval_ms = 10\n", "5 peer.discover_interval_ms: invalid value"));
  EXPECT_EQ(errors_of(kPeerOn + "idle_session_ms = 0\n"), "");
  const LoadResult d = load_string("", "<empty>");
  EXPECT_EQ(d.config.peer.discover, "");
  EXPECT_EQ(d.config.peer.discover_port, 18515);
  EXPECT_EQ(d.config.peer.discover_interval_ms, 30000);
  EXPECT_EQ(d.config.peer.idle_session_ms, 300000);
}

TEST(Config, FlowRules) {
  EXPECT_EQ(errors_of("[flow]\nrejoin_backoff_max_ms = 99\n"),
            "2 flow.rejoin_backoff_max_ms: rejoin_backoff_max_ms (99) must be at least rejoin_backoff_min_ms (100)\n");
  EXPECT_EQ(errors_of("[flow]\nrejoin_backoff_min_ms = 10000\n"), "");
  for (const char* policy : {"weighted", "congestion_aware", "round_robin", "hash"}) {
    EXPECT_EQ(errors_of(fmt::format("[flow]\npolicy = \"{}\"\n", policy)), "") << policy;
  }
  for (const char* key : {"sq_depth", "cq_depth"}) {
    for (int64_t ok : {16, 1024, 65536}) EXPECT_EQ(errors_of(fmt::format("[flow]\n{} = {}\n", key, ok)), "") << ok;
    for (int64_t bad : {0, 8, 24, 65535, 131072, -16}) {
      EXPECT_TRUE(has_error(fmt::format("[flow]\n{} = {}\n", key, bad), "a power of two in [16, 65536]"))
          << key << " " << bad;
    }
  }
  for (const char* ok : {"0", "1", "0.5", "1.0", "0e0"}) {
    EXPECT_EQ(errors_of(fmt::format("[flow]\nmin_lane_fraction = {}\n", ok)), "") << ok;
  }
  for (const char* bad : {"-0.01", "1.01", "nan", "inf"}) {
    EXPECT_TRUE(has_error(fmt::format("[flow]\nmin_lane_fraction = {}\n", bad), "a number in [0, 1]")) << bad;
  }
  for (const char* bad : {"0", "0.0", "-1", "inf", "nan"}) {
    EXPECT_TRUE(has_error(fmt::format("[flow]\ncnp_half_weight_per_s = {}\n", bad), "a finite number > 0")) << bad;
  }
  EXPECT_EQ(errors_of("[flow]\nchunk_bytes = 4096\n"), "");
  EXPECT_EQ(errors_of("[flow]\nchunk_bytes = 1073741824\n"), "");
  EXPECT_TRUE(has_error("[flow]\nchunk_bytes = 4095\n", "an integer in [4096, 1073741824]"));
  EXPECT_TRUE(has_error("[flow]\nchunk_bytes = 1073741825\n", "an integer in [4096, 1073741824]"));
  for (int64_t ok : {1, 4, 16}) EXPECT_EQ(errors_of(fmt::format("[flow]\nqps_per_lane = {}\n", ok)), "") << ok;
  for (int64_t bad : {0, 17, -1}) {
    EXPECT_TRUE(has_error(fmt::format("[flow]\nqps_per_lane = {}\n", bad), "an integer in [1, 16]")) << bad;
  }
}

// The peer handshake's endpoint count is one byte: 16 NICs with 16 QPs each would not fit.
TEST(Config, QpsPerLaneTimesNicsFitOneHandshake) {
  auto nics = [](int n) {
    std::string t;
    for (int i = 0; i < n; ++i)
      t += fmt::format("[[nic]]\nname = \"soft{}\"\nbackend = \"soft\"\naddress = \"127.0.0.{}\"\n", i, i + 1);
    return t;
  };
  EXPECT_EQ(errors_of("[flow]\nqps_per_lane = 16\n" + nics(15)), "");
  EXPECT_EQ(errors_of("[flow]\nqps_per_lane = 16\n" + nics(16)),
            "2 flow.qps_per_lane: 16 [[nic]] sections x qps_per_lane 16 = 256 queue pairs per peer, more than the 255 "
            "one peer handshake carries\n");
}

TEST(Config, NumbersRenderAsTomlFloats) {
  EXPECT_EQ(to_toml(Value{0.25}), "0.25");
  EXPECT_EQ(to_toml(Value{1000.0}), "1000.0");
  EXPECT_EQ(to_toml(Value{0.0}), "0.0");
  EXPECT_EQ(to_toml(Value{1e300}), "1e+300");
  // A printed number reads back as the same double.
  for (double d : {0.1, 1.0 / 3, 250.5, 1e-7}) {
    const LoadResult r = load_string("[flow]\ncnp_half_weight_per_s = " + to_toml(Value{d}) + "\n", "t.toml");
    ASSERT_TRUE(r.ok()) << all_errors(r);
    EXPECT_EQ(r.config.flow.cnp_half_weight_per_s, d);
  }
}

// Each file under tests/data/config/invalid/ starts with "# expect: LINE KEY MESSAGE-PART" and
// must produce an error at exactly that line and key path, whose message contains MESSAGE-PART.
TEST(Config, EveryInvalidFileNamesLineKeyAndExpectation) {
  int files = 0;
  for (const auto& entry : fs::directory_iterator(kData / "invalid")) {
    const std::string text = read(entry.path());
    const std::string first = text.substr(0, text.find('\n'));
    ASSERT_EQ(first.rfind("# expect: ", 0), 0u) << entry.path();
    std::istringstream ex(first.substr(10));
    uint32_t line = 0;
    std::string key;
    ex >> line >> key;
    std::string part;
    std::getline(ex, part);
    part.erase(0, part.find_first_not_of(' '));
    if (key == "-") key.clear();

    const LoadResult r = load_file(entry.path().string());
    ASSERT_FALSE(r.ok()) << entry.path();
    bool found = false;
    for (const auto& e : r.errors) {
      if (e.line == line && e.key == key && e.message.find(part) != std::string::npos) found = true;
    }
    EXPECT_TRUE(found) << entry.path().filename() << ": wanted line " << line << " key '" << key << "' message '"
                       << part << "', got:\n"
                       << all_errors(r);
    // The rendered message starts with file:line:column.
    EXPECT_EQ(r.errors.front().to_string().rfind(entry.path().string() + ":", 0), 0u);
    ++files;
  }
  EXPECT_GE(files, 15);
}

TEST(Config, CollectsEveryErrorNotJustTheFirst) {
  const LoadResult r = load_string(
      "[daemon]\nlog_level = \"loud\"\nbogus = 1\n[metrics]\nlisten = \"nowhere\"\n[cc]\nrpg_ai_rate = 0\n", "multi.toml");
  ASSERT_EQ(r.errors.size(), 4u) << all_errors(r);
  EXPECT_EQ(r.errors[0].to_string().rfind("multi.toml:2:13: daemon.log_level: invalid value \"loud\"", 0), 0u)
      << r.errors[0].to_string();
  EXPECT_EQ(r.errors[1].line, 3u);
  EXPECT_EQ(r.errors[2].key, "metrics.listen");
  EXPECT_EQ(r.errors[3].key, "cc.rpg_ai_rate");
}

TEST(Config, UnreadableFileIsAnError) {
  const LoadResult r = load_file("/nonexistent/rdmad.toml");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].to_string().find("/nonexistent/rdmad.toml: cannot read file"), std::string::npos);
}

TEST(Config, EnvironmentOverridesLogLevelAndSaysSo) {
  LoadResult r;
  r.config = default_config();
  ASSERT_EQ(setenv("RDMAD_LOG_LEVEL", "trace", 1), 0);
  apply_environment(r);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.config.daemon.log_level, "trace");
  ASSERT_EQ(r.warnings.size(), 1u) << "an override of the file's value must not be silent";
  EXPECT_EQ(r.warnings[0].to_string(),
            "<environment>: RDMAD_LOG_LEVEL: \"trace\" overrides daemon.log_level = \"info\" of the configuration");
  // The same value as the file's overrides nothing: no warning.
  apply_environment(r);
  EXPECT_EQ(r.warnings.size(), 1u);
  ASSERT_EQ(setenv("RDMAD_LOG_LEVEL", "chatty", 1), 0);
  apply_environment(r);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].to_string().find("RDMAD_LOG_LEVEL: invalid value \"chatty\""), std::string::npos);
  EXPECT_EQ(r.config.daemon.log_level, "trace");
  unsetenv("RDMAD_LOG_LEVEL");
}

TEST(Config, ReferenceDocMatchesFieldTable) {
  // The page documents every backend's keys; a build without DPDK has no dpdk keys to render.
  if (verbs::find_builtin_backend("dpdk") == nullptr) {
    GTEST_SKIP() << "docs/configuration.md is rendered by a build with the dpdk backend (RDMAD_WITH_DPDK, "
                    "libdpdk-dev); this build has none";
  }
  const fs::path doc = fs::path(RDMAD_SOURCE_DIR) / "docs/configuration.md";
  EXPECT_TRUE(read(doc) == render_markdown())
      << "docs/configuration.md is out of date: regenerate it with `build/daemon/rdmad --print-config-doc > "
         "docs/configuration.md`";
}

}  // namespace
}  // namespace rdmad::config

namespace rdmad::config {
namespace {

TEST(ConfigIdentity, AdminSocketDefaultsBesideTheClientSocketsDirectory) {
  const LoadResult r = load_string("", "<empty>");
  ASSERT_TRUE(r.ok()) << all_errors(r);
  EXPECT_EQ(admin_socket_path(r.config), "/run/rdmad-admin/admin.sock");
  EXPECT_EQ(default_admin_socket_path("/tmp/x/run/rdmad.sock"), "/tmp/x/run-admin/admin.sock");
  const LoadResult set = load_string("[ipc]\nadmin_socket_path = \"/run/ops/rdmad.sock\"\n", "t.toml");
  ASSERT_TRUE(set.ok()) << all_errors(set);
  EXPECT_EQ(admin_socket_path(set.config), "/run/ops/rdmad.sock");
  EXPECT_EQ(set.config.ipc.proc_root, "/proc");
}

TEST(ConfigIdentity, AdminSocketInsideTheClientSocketsDirectoryIsRefused) {
  for (const char* path : {"/run/rdmad/admin.sock", "/run/rdmad/admin/admin.sock", "/run/rdmad/rdmad.sock"}) {
    const LoadResult r = load_string(fmt::format("[ipc]\nadmin_socket_path = \"{}\"\n", path), "t.toml");
    ASSERT_FALSE(r.ok()) << path;
    const std::string e = all_errors(r);
    EXPECT_NE(e.find("t.toml:2:"), std::string::npos) << e;
    EXPECT_NE(e.find("ipc.admin_socket_path"), std::string::npos) << e;
    EXPECT_NE(e.find("inside the client socket's directory /run/rdmad/"), std::string::npos) << e;
  }
}

TEST(ConfigIdentity, QuotasNameAUidOrAPod) {
  const LoadResult ok = load_string(
      "[[quota]]\nuid = 1000\nregistrations = 8\n"
      "[[quota]]\npod_uid = \"6f1e5b8a-3c2d-4e9f-8a7b-1c2d3e4f5a6b\"\nregistrations = 9\n",
      "t.toml");
  ASSERT_TRUE(ok.ok()) << all_errors(ok);
  ASSERT_EQ(ok.config.quotas.size(), 2u);
  EXPECT_EQ(ok.config.quotas[1].pod_uid, "6f1e5b8a-3c2d-4e9f-8a7b-1c2d3e4f5a6b");
  EXPECT_EQ(ok.config.quotas[1].registrations, 9);
  const struct {
    const char* text;
    const char* error;
  } bad[] = {
      {"[[quota]]\nregistrations = 8\n", "exactly one of uid or pod_uid"},
      {"[[quota]]\nuid = 1\npod_uid = \"6f1e5b8a-3c2d-4e9f-8a7b-1c2d3e4f5a6b\"\n", "exactly one of uid or pod_uid"},
      {"[[quota]]\npod_uid = \"6F1E5B8A-3C2D-4E9F-8A7B-1C2D3E4F5A6B\"\n", "quota[0].pod_uid"},
      {"[[quota]]\npod_uid = \"pod-a\"\n", "a pod UID: 36 characters"},
      {"[[quota]]\npod_uid = \"6f1e5b8a-3c2d-4e9f-8a7b-1c2d3e4f5a6b\"\n"
       "[[quota]]\npod_uid = \"6f1e5b8a-3c2d-4e9f-8a7b-1c2d3e4f5a6b\"\n",
       "a second [[quota]] for pod 6f1e5b8a"},
  };
  for (const auto& b : bad) {
    const LoadResult r = load_string(b.text, "t.toml");
    EXPECT_FALSE(r.ok()) << b.text;
    EXPECT_NE(all_errors(r).find(b.error), std::string::npos) << b.text << "\n" << all_errors(r);
  }
}

}  // namespace
}  // namespace rdmad::config
