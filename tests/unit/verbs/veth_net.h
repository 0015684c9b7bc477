#pragma once
// Network plumbing for the dpdk tests: a veth pair whose end `a` a net_af_packet port takes (no
// address, IPv6 off: the kernel sends nothing on it) and whose end `b` serves a second port the
// same way, or the kernel: moved into a network namespace of its own with an address, where a
// soft NIC binds its socket (InNetns). Everything is removed with the object; names carry the
// test process's pid, and what a killed run left behind goes when the next one creates a pair.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <regex>
#include <string>

namespace rdmad::verbs::test {

/// Runs `ip <args>`, its output dropped; true when it succeeded.
inline bool run_ip(const std::string& args) {
  return std::system(("ip " + args + " >/dev/null 2>&1").c_str()) == 0;
}

/// What `command` printed (a shell command line).
inline std::string shell_output(const std::string& command) {
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[512];
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    pclose(p);
  }
  return out;
}

class VethPair {
 public:
  /// Creates the pair (MTU 9000, up); with `ns` non-empty, end b goes into a new namespace of
  /// that name suffix with address `cidr` ("10.78.0.1/24", "fd00::1/64"). Null with *why set
  /// where this machine cannot (not root, no iproute2).
  static std::unique_ptr<VethPair> create(std::string* why, bool in_netns = false, const std::string& cidr = "") {
    if (geteuid() != 0) return *why = "creating a veth pair needs root", nullptr;
    sweep_stale();
    static int next = 0;
    std::unique_ptr<VethPair> p(new VethPair());
    const std::string id = std::to_string(getpid()) + "_" + std::to_string(next++);
    p->a_ = "rdv" + id + "a";
    p->b_ = "rdv" + id + "b";
    // net_af_packet (DPDK 22.11) joins each socket to PACKET_FANOUT group (pid ^ ifindex) & 0xffff,
    // and a group another process's socket on another interface holds refuses it: the test
    // processes ctest runs side by side collided that way about once in 200 opens. Interface
    // indexes picked so that the group is (pid << 2 | end) & 0xffff keep them apart.
    auto index = [&](int end) { return (getpid() ^ ((getpid() << 2 | ((2 * next + end) & 3)) & 0xffff)); };
    const std::string add = "link add " + p->a_ + " %1 mtu 9000 type veth peer name " + p->b_ + " %2 mtu 9000";
    auto with = [&](const std::string& ia, const std::string& ib) {
      std::string cmd = add;
      cmd.replace(cmd.find("%1"), 2, ia);
      cmd.replace(cmd.find("%2"), 2, ib);
      return run_ip(cmd);
    };
    const bool indexed = index(0) > 0 && index(1) > 0 &&
                         with("index " + std::to_string(index(0)), "index " + std::to_string(index(1)));
    if (!indexed && !with("", "")) {
      return *why = "cannot create veth pair " + p->a_ + "/" + p->b_ + " (ip link add ... type veth)", nullptr;
    }
    p->created_ = true;
    std::string setup = "sysctl -qw net.ipv6.conf." + p->a_ + ".disable_ipv6=1";
    if (!in_netns) setup += " net.ipv6.conf." + p->b_ + ".disable_ipv6=1";
    std::system((setup + " >/dev/null 2>&1").c_str());
    bool ok = run_ip("link set " + p->a_ + " up");
    if (in_netns) {
      p->ns_ = "rdmad-dpdk-" + id;
      const std::string in = "-n " + p->ns_ + " ";
      const bool v6 = cidr.find(':') != std::string::npos;
      ok = ok && run_ip("netns add " + p->ns_) && run_ip("link set " + p->b_ + " netns " + p->ns_) &&
           run_ip(in + "link set lo up") && run_ip(in + "link set " + p->b_ + " up") &&
           run_ip(in + "addr add " + cidr + " dev " + p->b_ + (v6 ? " nodad" : ""));
    } else {
      ok = ok && run_ip("link set " + p->b_ + " up");
    }
    if (!ok) return *why = "cannot set up veth pair " + p->a_ + "/" + p->b_, nullptr;
    return p;
  }

  ~VethPair() {
    if (created_) run_ip("link del " + a_);  // takes b with it, wherever it is
    if (!ns_.empty()) run_ip("netns del " + ns_);
  }
  VethPair(const VethPair&) = delete;
  VethPair& operator=(const VethPair&) = delete;

  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }
  const std::string& ns() const { return ns_; }
  /// The MAC address of end a, or of end b, as the kernel shows it.
  std::string mac(bool of_b) const {
    const std::string in = of_b && !ns_.empty() ? "-n " + ns_ + " " : "";
    const std::string out = shell_output("ip " + in + "-o link show " + (of_b ? b_ : a_));
    std::smatch m;
    static const std::regex re("link/ether ([0-9a-f:]{17})");
    return std::regex_search(out, m, re) ? m[1].str() : "";
  }
  /// The kernel's neighbour entry for `ip` on end b (in its namespace): "lladdr ... STATE", or "".
  std::string b_neighbor(const std::string& ip) const {
    return shell_output("ip " + (ns_.empty() ? "" : "-n " + ns_ + " ") + "neigh show " + ip + " dev " + b_);
  }

  /// Deletes pairs and namespaces of test processes that are gone.
  static void sweep_stale() {
    const std::string list = shell_output("ip -o link show; ip netns list");
    static const std::regex re(R"((rdv|rdmad-dpdk-)(\d+)_\d+)");
    for (auto it = std::sregex_iterator(list.begin(), list.end(), re); it != std::sregex_iterator(); ++it) {
      const pid_t pid = static_cast<pid_t>(std::stol((*it)[2]));
      if (pid == getpid() || kill(pid, 0) == 0) continue;
      const std::string name = (*it)[0];
      run_ip(name.rfind("rdv", 0) == 0 ? "link del " + name + "a" : "netns del " + name);
    }
  }

 private:
  VethPair() = default;
  std::string a_, b_, ns_;
  bool created_ = false;
};

/// This thread runs in network namespace `ns` until the object goes (setns): the sockets it opens
/// and the threads it starts meanwhile live there.
class InNetns {
 public:
  explicit InNetns(const std::string& ns) : home_(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) {
    const int fd = open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    ok_ = home_ >= 0 && fd >= 0 && setns(fd, CLONE_NEWNET) == 0;
    if (fd >= 0) close(fd);
  }
  ~InNetns() {
    if (ok_) setns(home_, CLONE_NEWNET);
    if (home_ >= 0) close(home_);
  }
  InNetns(const InNetns&) = delete;
  InNetns& operator=(const InNetns&) = delete;
  bool ok() const { return ok_; }

 private:
  int home_;
  bool ok_ = false;
};

}  // namespace rdmad::verbs::test
