// Peer discovery through DNS with real daemons and a real DNS server: Debian's dnsmasq serves the
// records, and the daemons run in a network namespace whose resolv.conf (ip-netns bind-mounts
// /etc/netns/NS/resolv.conf) names it, on port 53 of the namespace's own address (glibc's resolver
// talks to port 53 only). The daemons have no [[peers]]: they find each other through
// "dns:rdmad-peers.test", open sessions when a flow needs them, notice a record removed and added
// back within the re-resolve interval, and close a session nobody uses. Needs root (namespaces).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>

#include "integration/flow/flow_cluster.h"

namespace rdmad::test {
namespace {

int sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

std::string run(const std::string& cmd) {
  std::string out;
  if (FILE* f = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
    ::pclose(f);
  }
  return out;
}

std::string find_binary(std::initializer_list<const char*> paths) {
  for (const char* p : paths)
    if (::access(p, X_OK) == 0) return p;
  return {};
}

// One network namespace whose loopback holds the DNS server's address (10.78.0.1) and one address
// per daemon (10.78.0.11, .12, ...), dnsmasq answering for rdmad-peers.test from a
// hosts file the test rewrites (SIGHUP reloads it).
class DnsNamespace {
 public:
  DnsNamespace() : tag_(std::to_string(::getpid() % 100000)), ns_("rdmad-dns-" + tag_) {}
  ~DnsNamespace() {
    dnsmasq_.reset();
    sh("ip netns del " + ns_);
    sh("rm -rf /etc/netns/" + ns_);
  }

  // Empty on success, else why the test must skip.
  std::string create(int daemons, const std::string& srv_records = "") {
    const std::string dnsmasq = find_binary({"/usr/sbin/dnsmasq", "/usr/bin/dnsmasq"});
    if (dnsmasq.empty()) return "dnsmasq is not installed (scripts/setup-deps installs dnsmasq-base)";
    if (sh("ip netns add " + ns_) != 0) return "cannot create a network namespace here";
    sh(in() + "ip link set lo up");
    if (sh(in() + "ip addr add 10.78.0.1/32 dev lo") != 0) return "cannot add an address in the namespace";
    for (int i = 0; i < daemons; ++i) sh(in() + "ip addr add " + address(i) + "/32 dev lo");
    // ip-netns bind-mounts this over /etc/resolv.conf for whatever `ip netns exec` starts.
    sh("mkdir -p /etc/netns/" + ns_);
    std::ofstream("/etc/netns/" + ns_ + "/resolv.conf") << "nameserver 10.78.0.1\noptions timeout:1 attempts:2\n";
    hosts_ = dir_.path() + "/hosts";
    std::vector<int> all;
    for (int i = 0; i < daemons; ++i) all.push_back(i);
    write_hosts(all);
    std::vector<std::string> argv = {find_binary({"/usr/sbin/ip", "/sbin/ip"}), "netns", "exec", ns_, dnsmasq,
                                     "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
                                     "--addn-hosts=" + hosts_, "--listen-address=10.78.0.1", "--bind-interfaces",
                                     "--port=53", "--user=root", "--local-ttl=0", "--pid-file=", "--log-facility=-"};
    std::istringstream srv(srv_records);
    for (std::string line; std::getline(srv, line);)
      if (!line.empty()) argv.push_back("--srv-host=" + line);
    dnsmasq_ = std::make_unique<Subprocess>(argv);
    // Answering once every record is served (a poll with a deadline, no sleep).
    if (!eventually([&] { return lookup().size() == static_cast<size_t>(daemons); }, 10s))
      return "dnsmasq did not answer in the namespace: " + dnsmasq_->output();
    return {};
  }

  static std::string address(int i) { return "10.78.0." + std::to_string(11 + i); }
  const std::string& ns() const { return ns_; }
  std::string in() const { return "ip netns exec " + ns_ + " "; }

  // Serves A records of rdmad-peers.test for these daemons only, and tells dnsmasq (SIGHUP).
  void write_hosts(const std::vector<int>& daemons) {
    std::ofstream f(hosts_, std::ios::trunc);
    for (int i : daemons) f << address(i) << " rdmad-peers.test node" << i << ".test\n";
    f.close();
    if (dnsmasq_) dnsmasq_->signal(SIGHUP);
  }
  // The addresses the namespace's resolver gives for rdmad-peers.test now.
  std::vector<std::string> lookup() const {
    std::vector<std::string> out;
    std::istringstream s(run(in() + "getent ahostsv4 rdmad-peers.test 2>/dev/null"));
    for (std::string line; std::getline(s, line);)
      if (line.find("STREAM") != std::string::npos) out.push_back(line.substr(0, line.find(' ')));
    return out;
  }

 private:
  std::string tag_;
  std::string ns_;
  TempDir dir_;
  std::string hosts_;
  std::unique_ptr<Subprocess> dnsmasq_;
};

NodeSpec discovering_node(const DnsNamespace& dns, int i, const std::string& discover) {
  const std::string a = DnsNamespace::address(i);
  NodeSpec s{fmt::format("node-{}", i), {NicSpec{a, 0, ""}}, "", "", 14,
             {find_binary({"/usr/sbin/ip", "/sbin/ip"}), "netns", "exec", dns.ns()}, a};
  s.peer_keys = fmt::format(
      "discover = \"{}\"\ndiscover_interval_ms = 300\nidle_session_ms = 1500\nhandshake_timeout_ms = 2000\n", discover);
  return s;
}

// The node's /metrics, read from inside the namespace (its 127.0.0.1 is not the test's).
std::string metrics_of(const DnsNamespace& dns, const Node& n) {
  std::smatch m;
  const std::string out = n.output();
  if (!std::regex_search(out, m, std::regex(R"(serving metrics url=(http://127\.0\.0\.1:\d+/metrics))"))) return {};
  return run(dns.in() + "curl -s " + m[1].str());
}

double metric_value(const std::string& metrics, const std::string& series) {
  std::smatch m;
  if (!std::regex_search(metrics, m, std::regex("\n" + series + " ([0-9.e+-]+)\n"))) return -1;
  return std::stod(m[1].str());
}

std::string peers_json(const Node& n) { return rdmactl(n, {"--json", "peers"}); }

TEST(DnsDiscovery, ThreeDaemonsFindEachOtherOpenSessionsLazilyFollowTheRecordsAndCloseIdleSessions) {
  if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  DnsNamespace dns;
  if (const std::string why = dns.create(3); !why.empty()) GTEST_SKIP() << why;
  std::vector<std::unique_ptr<Node>> nodes;
  for (int i = 0; i < 3; ++i) {
    nodes.push_back(std::make_unique<Node>(discovering_node(dns, i, "dns:rdmad-peers.test"), 18515));
    ASSERT_TRUE(nodes.back()->start({}));
  }
  Node& n0 = *nodes[0];
  Node& n1 = *nodes[1];

  // Every daemon lists the other two addresses as discovered, not its own, and dials nobody yet.
  for (int i = 0; i < 3; ++i) {
    std::string peers;
    ASSERT_TRUE(eventually(
        [&] {
          peers = peers_json(*nodes[i]);
          size_t found = 0;
          for (int j = 0; j < 3; ++j)
            found += peers.find("\"address\":\"" + DnsNamespace::address(j) + ":18515\"") != std::string::npos;
          return found == 2;
        },
        10s))
        << peers << nodes[i]->output();
    EXPECT_EQ(peers.find(DnsNamespace::address(i) + ":18515"), std::string::npos) << "its own address: " << peers;
    EXPECT_NE(peers.find("\"source\":\"dns\""), std::string::npos) << peers;
    EXPECT_EQ(peers.find("\"state\":\"ready\""), std::string::npos) << "no flow yet, no session: " << peers;
  }
  const std::string m0 = metrics_of(dns, n0);
  EXPECT_EQ(metric_value(m0, "rdmad_peers_discovered"), 2) << m0;
  EXPECT_EQ(metric_value(m0, "rdmad_peers_connected"), 0) << m0;
  EXPECT_GE(metric_value(m0, "rdmad_peer_discovery_resolutions_total\\{result=\"ok\"\\}"), 1) << m0;

  // The first flow to node-1 opens its session (the open waits for it) and carries a verified
  // transfer; node-2, dialled only to learn who it is, gets no session.
  const auto t_open = std::chrono::steady_clock::now();
  rdmad_flow* fa = nullptr;
  ASSERT_EQ(rdmad_flow_open(n0.client(), "node-1", nullptr, &fa), RDMAD_OK) << rdmad_last_error(n0.client())
                                                                              << n0.output();
  const double open_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_open).count();
  EXPECT_EQ(rdmad_flow_get_state(fa), RDMAD_FLOW_CONNECTED);
  constexpr size_t kBytes = 4 << 20;
  Buffer src(n0.client(), kBytes, kAllAccess);
  Buffer dst(n1.client(), kBytes, kAllAccess);
  auto transfer = [&](uint8_t seed) {
    fill(src.data(), kBytes, seed);
    fill(dst.data(), kBytes, static_cast<uint8_t>(seed + 1));
    rdmad_token token{};
    EXPECT_EQ(rdmad_export(n1.client(), dst.mr, 0, kBytes, "node-0", RDMAD_ACCESS_REMOTE_WRITE, &token), RDMAD_OK)
        << rdmad_last_error(n1.client());
    rdmad_remote remote{};
    EXPECT_TRUE(eventually([&] { return rdmad_flow_import(fa, &token, &remote) == RDMAD_OK; }, 5s))
        << rdmad_last_error(n0.client());
    EXPECT_EQ(rdmad_flow_write(fa, seed, src.mr, 0, &remote, 0, kBytes), RDMAD_OK);
    auto c = wait_completion(fa, 30s);
    EXPECT_TRUE(c.has_value()) << n0.output();
    if (c) {
      EXPECT_EQ(c->status, RDMAD_OK);
    }
    EXPECT_EQ(first_difference(src.data(), dst.data(), kBytes), -1);
    return token;
  };
  rdmad_token token = transfer(31);
  std::string peers = peers_json(n0);
  EXPECT_TRUE(std::regex_search(peers, std::regex(R"("node_id":"node-1","address":"10\.78\.0\.12:18515","state":"ready","dialled":false,"source":"dns")")))
      << peers;
  EXPECT_TRUE(std::regex_search(peers, std::regex(R"("node_id":"node-2","address":"10\.78\.0\.13:18515","state":"down")")))
      << "node-2 identified, not connected: " << peers;
  EXPECT_EQ(metric_value(metrics_of(dns, n0), "rdmad_peers_connected"), 1);

  // A node id no address proves: refused at once with a clear, retryable error.
  rdmad_flow* nowhere = nullptr;
  EXPECT_EQ(rdmad_flow_open(n0.client(), "node-9", nullptr, &nowhere), RDMAD_ERR_PEER);
  const std::string why = rdmad_last_error(n0.client());
  EXPECT_NE(why.find("peer node-9 is not a discovered node: dns:rdmad-peers.test names 2 addresses"), std::string::npos)
      << why;
  EXPECT_NE(why.find("identified as node-1, node-2"), std::string::npos) << why;
  EXPECT_NE(why.find("retry later"), std::string::npos) << why;

  // node-1's record goes: node-0 notices within the interval (300 ms; the bound leaves room for
  // a loaded machine), closes the session and its flow is disconnected.
  dns.write_hosts({0, 2});
  const auto t_removed = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] { return rdmad_flow_get_state(fa) == RDMAD_FLOW_DISCONNECTED; }, 5s))
      << peers_json(n0) << n0.output();
  const double noticed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_removed).count();
  // It is no longer a discovered address; the node stays listed (it was connected) with why it went.
  peers = peers_json(n0);
  EXPECT_EQ(peers.find("\"address\":\"10.78.0.12:18515\",\"state\":\"down\",\"dialled\":false,\"source\":\"dns\""),
            std::string::npos)
      << peers;
  EXPECT_TRUE(std::regex_search(
      peers, std::regex(R"("node_id":"node-1",[^}]*"state":"down",[^}]*"last_error":"no longer discovered through dns:rdmad-peers\.test")")))
      << peers;

  // Back in the DNS: the flow, which still names node-1, gets its session again and transfers.
  dns.write_hosts({0, 1, 2});
  const auto t_added = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] { return rdmad_flow_get_state(fa) == RDMAD_FLOW_CONNECTED; }, 10s))
      << peers_json(n0) << n0.output();
  const double back_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_added).count();
  EXPECT_EQ(rdmad_revoke(n1.client(), &token), RDMAD_OK);
  token = transfer(41);

  // Nothing uses the session any more: it is closed after idle_session_ms (1.5 s) on both sides.
  rdmad_flow_close(fa);
  EXPECT_EQ(rdmad_revoke(n1.client(), &token), RDMAD_OK);
  const auto t_idle = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually(
      [&] {
        peers = peers_json(n0);
        return std::regex_search(peers, std::regex(R"("node_id":"node-1","address":"[^"]+","state":"down")"));
      },
      10s))
      << peers << n0.output() << n1.output();
  const double idle_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_idle).count();
  EXPECT_NE(peers.find("idle: closed at"), std::string::npos) << peers;
  EXPECT_GE(idle_ms, 1500 - 100) << "closed before idle_session_ms";
  const std::string m1 = metrics_of(dns, n1);
  EXPECT_EQ(metric_value(metrics_of(dns, n0), "rdmad_peers_connected") + metric_value(m1, "rdmad_peers_connected"), 0)
      << peers_json(n0) << peers_json(n1) << n0.output() << n1.output();
  EXPECT_GE(metric_value(metrics_of(dns, n0), "rdmad_peer_idle_closes_total") +
                metric_value(m1, "rdmad_peer_idle_closes_total"),
            2);
  std::printf("dns discovery: lazy open %.1f ms, record removed noticed in %.1f ms, back in %.1f ms, idle close "
              "after %.1f ms (idle_session_ms 1500, discover_interval_ms 300)\n",
              open_ms, noticed_ms, back_ms, idle_ms);
}

// SRV records carry each node's port: two daemons on different ports find each other.
TEST(DnsDiscovery, SrvRecordsGiveHostAndPort) {
  if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  DnsNamespace dns;
  const std::string srv = "_rdmad._tcp.rdmad-peers.test,node0.test,18600\n_rdmad._tcp.rdmad-peers.test,node1.test,18601\n";
  if (const std::string why = dns.create(2, srv); !why.empty()) GTEST_SKIP() << why;
  Node a(discovering_node(dns, 0, "dns-srv:_rdmad._tcp.rdmad-peers.test"), 18600);
  Node b(discovering_node(dns, 1, "dns-srv:_rdmad._tcp.rdmad-peers.test"), 18601);
  ASSERT_TRUE(a.start({}));
  ASSERT_TRUE(b.start({}));
  std::string peers;
  ASSERT_TRUE(eventually(
      [&] {
        peers = peers_json(a);
        return peers.find("\"address\":\"10.78.0.12:18601\"") != std::string::npos;
      },
      10s))
      << peers << a.output();
  EXPECT_EQ(peers.find("18600"), std::string::npos) << "its own address: " << peers;
  rdmad_flow* f = nullptr;
  ASSERT_EQ(rdmad_flow_open(a.client(), "node-1", nullptr, &f), RDMAD_OK) << rdmad_last_error(a.client());
  EXPECT_EQ(rdmad_flow_get_state(f), RDMAD_FLOW_CONNECTED);
  rdmad_flow_close(f);
}

}  // namespace
}  // namespace rdmad::test
