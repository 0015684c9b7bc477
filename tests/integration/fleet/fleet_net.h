#pragma once
// The fleet's network, the way a rack of hosts with two rails is wired: a hub namespace with two
// Linux bridges (the two rail switches) and, per node, a network namespace with one veth per rail
// into the hub's bridge of that rail (rail r: node i is 10.99.r.(i+1)/24, the hub 10.99.r.254).
// dnsmasq runs in the hub on 10.99.0.254 and serves the fleet's A records from a hosts file that
// set_record() rewrites (SIGHUP re-reads it); every node namespace resolves through it
// (/etc/netns/<ns>/resolv.conf, which `ip netns exec` mounts over /etc/resolv.conf).
//
// Everything is removed on every exit path: the destructor (processes still in the namespaces,
// dnsmasq, the namespaces with their veths and bridges, the resolv.conf files), the processes the
// test starts die with it (in_node() runs them under setpriv --pdeathsig KILL), and what a run
// killed outright left behind goes at the start of the next (sweep_stale: names carry the pid).
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace rdmad::test::fleet {

inline constexpr int kRails = 2;
inline constexpr const char* kFleetDomain = "fleet.test";
inline constexpr const char* kServiceName = "rdmad-peers.fleet.test";  // every node's A record

class FleetNet {
 public:
  explicit FleetNet(int nodes);
  ~FleetNet();
  FleetNet(const FleetNet&) = delete;
  FleetNet& operator=(const FleetNet&) = delete;

  /// Builds the namespaces, bridges and veths and starts dnsmasq with every node's record; false
  /// with the reason in *why where this machine cannot (no root, no network namespaces, no dnsmasq).
  bool create(std::string* why);

  int nodes() const { return nodes_; }
  std::string node_ns(int node) const;
  /// 10.99.<rail>.<node + 1>.
  static std::string address(int node, int rail);
  static std::string dns_server() { return "10.99.0.254"; }
  /// argv prefix that runs a program in the node's namespace, killed when the test process dies.
  std::vector<std::string> in_node(int node) const;

  /// Adds or removes the node's records (the service name and node-NN.fleet.test) and tells
  /// dnsmasq (SIGHUP).
  void set_record(int node, bool present);
  /// The IPv4 addresses `name` resolves to from inside the node's namespace (through its
  /// resolv.conf and dnsmasq, the C library's resolver as the daemon uses it), sorted.
  std::vector<std::string> resolve(int from_node, const std::string& name) const;

  /// What dnsmasq logged.
  std::string dns_log() const { return dns_ ? dns_->output() : std::string(); }

  /// Removes namespaces (and the processes in them) left by runs of this test whose process is gone.
  static void sweep_stale();

 private:
  void write_hosts() const;
  std::string hub_ns() const;
  std::string prefix() const;

  int nodes_;
  pid_t owner_;
  bool created_ = false;
  std::vector<bool> record_;
  TempDir dir_;
  std::unique_ptr<Subprocess> dns_;
};

/// Absolute path of a system program (Subprocess execs without a PATH search), or "" when absent.
std::string system_binary(const std::string& name);

}  // namespace rdmad::test::fleet
