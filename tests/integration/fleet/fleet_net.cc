#include "fleet_net.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

namespace rdmad::test::fleet {

namespace {

// Names are built here from numbers and fixed words only: nothing reaches the shell from outside.
int sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

std::string capture(const std::string& cmd) {
  std::string out;
  FILE* f = ::popen((cmd + " 2>/dev/null").c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  ::pclose(f);
  return out;
}

constexpr const char* kNsPrefix = "rdmad-fleet-";
constexpr int kHub = 0xfe;

// A locally administered MAC per node (kHub: the bridge) and rail.
std::string mac(int node, int rail) { return fmt::format("02:99:{:02x}:00:00:{:02x}", rail, node); }

// Kills what still runs in the namespace, then removes it (its veths and bridges go with it) and
// its /etc/netns directory.
void remove_namespace(const std::string& ns) {
  std::istringstream pids(capture("ip netns pids " + ns));
  for (long pid; pids >> pid;) ::kill(static_cast<pid_t>(pid), SIGKILL);
  sh("ip netns del " + ns);
  sh("rm -rf /etc/netns/" + ns);
}

bool run_batch(const TempDir& dir, const std::string& ns, const std::string& lines) {
  const std::string file = dir.write("batch-" + (ns.empty() ? std::string("host") : ns), lines);
  return sh("ip " + (ns.empty() ? std::string() : "-n " + ns + " ") + "-b " + file) == 0;
}

}  // namespace

std::string system_binary(const std::string& name) {
  for (const char* d : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    const std::string p = d + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

FleetNet::FleetNet(int nodes) : nodes_(nodes), owner_(::getpid()), record_(nodes, true) {}

FleetNet::~FleetNet() {
  dns_.reset();
  if (!created_) return;
  for (int i = 0; i < nodes_; ++i) remove_namespace(node_ns(i));
  remove_namespace(hub_ns());
}

std::string FleetNet::prefix() const { return fmt::format("{}{}-", kNsPrefix, owner_); }
std::string FleetNet::hub_ns() const { return prefix() + "hub"; }
std::string FleetNet::node_ns(int node) const { return fmt::format("{}n{:02}", prefix(), node); }
std::string FleetNet::address(int node, int rail) { return fmt::format("10.99.{}.{}", rail, node + 1); }

std::vector<std::string> FleetNet::in_node(int node) const {
  return {system_binary("ip"), "netns", "exec", node_ns(node), system_binary("setpriv"), "--pdeathsig", "KILL", "--"};
}

void FleetNet::sweep_stale() {
  // The namespaces, and the resolv.conf directories of namespaces already gone.
  std::istringstream list(capture("{ ip netns list; ls -1 /etc/netns; }"));
  const std::regex re(std::string("^(") + kNsPrefix + R"((\d+)-\S+))");
  std::set<std::string> stale;
  for (std::string line; std::getline(list, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, re)) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(m[2]));
    if (pid != ::getpid() && ::kill(pid, 0) != 0) stale.insert(m[1]);
  }
  for (const auto& ns : stale) remove_namespace(ns);
}

bool FleetNet::create(std::string* why) {
  if (::geteuid() != 0) return *why = "network namespaces need root", false;
  for (const char* tool : {"ip", "setpriv", "getent", "dnsmasq"})
    if (system_binary(tool).empty()) return *why = fmt::format("{} is not installed (scripts/setup-deps)", tool), false;
  sweep_stale();
  std::string host = fmt::format("netns add {}\n", hub_ns());
  for (int i = 0; i < nodes_; ++i) host += fmt::format("netns add {}\n", node_ns(i));
  created_ = true;  // from here on the destructor removes whatever part exists
  if (!run_batch(dir_, "", host)) return *why = "cannot create network namespaces here", false;
  // The hub: one bridge per rail (its address is where dnsmasq listens), one veth per node and rail.
  // Every address has a fixed MAC and every neighbour is a permanent entry: the kernel's ARP table
  // is one for all namespaces and 32 nodes x 62 neighbours overflow its limit (gc_thresh3, 1024 by
  // default: "neighbor table overflow", sends fail with ENOBUFS); permanent entries are exempt.
  std::string hub = "link set lo up\n";
  for (int r = 0; r < kRails; ++r) {
    hub += fmt::format("link add br{0} type bridge\nlink set br{0} address {1}\nlink set br{0} up\n"
                       "addr add 10.99.{0}.254/24 dev br{0}\n",
                       r, mac(kHub, r));
    for (int i = 0; i < nodes_; ++i)
      hub += fmt::format("neigh add {} lladdr {} dev br{} nud permanent\n", address(i, r), mac(i, r), r);
  }
  for (int i = 0; i < nodes_; ++i)
    for (int r = 0; r < kRails; ++r)
      hub += fmt::format("link add n{0:02}r{1} type veth peer name rail{1} netns {2}\nlink set n{0:02}r{1} master br{1}\n"
                         "link set n{0:02}r{1} up\n",
                         i, r, node_ns(i));
  if (!run_batch(dir_, hub_ns(), hub)) return *why = "cannot create the bridges and veth pairs", false;
  for (int i = 0; i < nodes_; ++i) {
    std::string node = "link set lo up\n";
    for (int r = 0; r < kRails; ++r) {
      node += fmt::format("link set rail{0} address {1}\naddr add {2}/24 dev rail{0}\nlink set rail{0} up\n"
                          "neigh add 10.99.{0}.254 lladdr {3} dev rail{0} nud permanent\n",
                          r, mac(i, r), address(i, r), mac(kHub, r));
      for (int j = 0; j < nodes_; ++j)
        if (j != i) node += fmt::format("neigh add {} lladdr {} dev rail{} nud permanent\n", address(j, r), mac(j, r), r);
    }
    if (!run_batch(dir_, node_ns(i), node)) return *why = "cannot address the node namespaces", false;
    const std::string etc = "/etc/netns/" + node_ns(i);
    if (sh("mkdir -p " + etc) != 0) return *why = "cannot create " + etc, false;
    std::ofstream(etc + "/resolv.conf") << fmt::format("nameserver {}\noptions timeout:1 attempts:3\n", dns_server());
  }
  // dnsmasq: only the fleet's records (no upstream, no /etc/hosts), answered with TTL 0 so a
  // removed record is gone at the next lookup; stays root so it can re-read the hosts file in
  // the test's private directory on SIGHUP.
  write_hosts();
  dns_ = std::make_unique<Subprocess>(std::vector<std::string>{
      system_binary("ip"), "netns", "exec", hub_ns(), system_binary("setpriv"), "--pdeathsig", "KILL", "--",
      system_binary("dnsmasq"), "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
      "--addn-hosts=" + dir_.path() + "/fleet.hosts", "--listen-address=" + dns_server(), "--bind-interfaces",
      "--user=root", "--pid-file=" + dir_.path() + "/dnsmasq.pid", "--log-facility=-",
      fmt::format("--local=/{}/", kFleetDomain), "--local-ttl=0"});
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (resolve(0, kServiceName).size() != static_cast<size_t>(nodes_)) {
    if (std::chrono::steady_clock::now() >= end || dns_->wait_exit(std::chrono::milliseconds(20)).has_value())
      return *why = "dnsmasq does not answer for the fleet:\n" + dns_->output(), false;
  }
  return true;
}

void FleetNet::write_hosts() const {
  std::string hosts;
  for (int i = 0; i < nodes_; ++i)
    if (record_[i]) hosts += fmt::format("{} {} node-{:02}.{}\n", address(i, 0), kServiceName, i, kFleetDomain);
  // Written whole and renamed, so a SIGHUP never reads half a file.
  const std::string tmp = dir_.write("fleet.hosts.new", hosts);
  std::rename(tmp.c_str(), (dir_.path() + "/fleet.hosts").c_str());
}

void FleetNet::set_record(int node, bool present) {
  record_[node] = present;
  write_hosts();
  if (dns_) dns_->signal(SIGHUP);
}

std::vector<std::string> FleetNet::resolve(int from_node, const std::string& name) const {
  std::istringstream out(capture(fmt::format("ip netns exec {} getent ahostsv4 {}", node_ns(from_node), name)));
  std::set<std::string> addresses;  // getent prints each address once per socket type
  for (std::string line; std::getline(out, line);) {
    std::istringstream words(line);
    std::string a;
    if (words >> a) addresses.insert(a);
  }
  return {addresses.begin(), addresses.end()};
}

}  // namespace rdmad::test::fleet
