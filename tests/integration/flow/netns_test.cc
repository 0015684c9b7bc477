// Two rdmad processes in two network namespaces joined by two veth pairs (one per NIC rail), the
// way two hosts are: no shared loopback, real interfaces, real addresses. The test process is
// the client of both through their Unix sockets (the file system is shared). Needs root.
#include <unistd.h>

#include <cstdlib>

#include "flow_cluster.h"

namespace rdmad::test {
namespace {

int sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

// The ip(8) binary (Subprocess execs without a PATH search).
std::string ip_binary() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (::access(p, X_OK) == 0) return p;
  return "ip";
}

class TwoHosts {
 public:
  TwoHosts() : tag_(std::to_string(::getpid() % 100000)) {}
  ~TwoHosts() {
    sh("ip netns del " + ns("a"));
    sh("ip netns del " + ns("b"));
  }
  // Two namespaces; rail r: veth "ra<r>" in a (10.77.r.1/24) <-> "rb<r>" in b (10.77.r.2/24).
  bool create() {
    if (sh("ip netns add " + ns("a")) != 0 || sh("ip netns add " + ns("b")) != 0) return false;
    for (int r = 0; r < 2; ++r) {
      const std::string va = "ra" + std::to_string(r) + "-" + tag_, vb = "rb" + std::to_string(r) + "-" + tag_;
      if (sh("ip link add " + va + " type veth peer name " + vb) != 0) return false;
      sh("ip link set " + va + " netns " + ns("a"));
      sh("ip link set " + vb + " netns " + ns("b"));
      sh(in("a") + "ip addr add 10.77." + std::to_string(r) + ".1/24 dev " + va);
      sh(in("b") + "ip addr add 10.77." + std::to_string(r) + ".2/24 dev " + vb);
      sh(in("a") + "ip link set " + va + " up");
      sh(in("b") + "ip link set " + vb + " up");
    }
    sh(in("a") + "ip link set lo up");
    sh(in("b") + "ip link set lo up");
    return true;
  }
  std::string ns(const std::string& side) const { return "rdmad-t" + side + "-" + tag_; }
  std::string in(const std::string& side) const { return "ip netns exec " + ns(side) + " "; }

 private:
  std::string tag_;
};

TEST(FlowNetns, OneGibibyteOverTwoVethRailsByteExact) {
  if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  TwoHosts hosts;
  if (!hosts.create()) GTEST_SKIP() << "cannot create network namespaces and veth pairs here";
  NodeSpec a{"node-a", {NicSpec{"10.77.0.1", 4791, ""}, NicSpec{"10.77.1.1", 4791, ""}}, "", "", 14,
             {ip_binary(), "netns", "exec", hosts.ns("a")}, "10.77.0.1"};
  NodeSpec b{"node-b", {NicSpec{"10.77.0.2", 4791, ""}, NicSpec{"10.77.1.2", 4791, ""}}, "", "", 14,
             {ip_binary(), "netns", "exec", hosts.ns("b")}, "10.77.0.2"};
  Pair pair(std::move(a), std::move(b));
  ASSERT_TRUE(pair.start());
  rdmad_flow* fa = nullptr;
  ASSERT_EQ(rdmad_flow_open(pair.a->client(), "node-b", nullptr, &fa), RDMAD_OK);
  ASSERT_EQ(rdmad_flow_wait_connected(fa, 15000), RDMAD_OK) << pair.a->output() << pair.b->output();
  const char* env = std::getenv("RDMAD_FLOW_TEST_BYTES");
  const size_t n = env != nullptr ? std::strtoull(env, nullptr, 0) : size_t{1} << 30;
  Buffer src(pair.a->client(), n, kAllAccess);
  Buffer dst(pair.b->client(), n, kAllAccess);
  fill(src.data(), n, 21);
  fill(dst.data(), n, 22);
  const rdmad_remote remote = export_and_import(*pair.b, dst, n, *pair.a, fa);
  ASSERT_EQ(rdmad_flow_write(fa, 1, src.mr, 0, &remote, 0, n), RDMAD_OK);
  auto c = wait_completion(fa, 240s);
  ASSERT_TRUE(c.has_value()) << pair.a->output();
  EXPECT_EQ(c->status, RDMAD_OK);
  EXPECT_EQ(first_difference(src.data(), dst.data(), n), -1);
  // Both rails carried traffic: each veth's transmit counter in node-a's namespace moved.
  for (int r = 0; r < 2; ++r) {
    FILE* f = ::popen((hosts.in("a") + "cat /sys/class/net/ra" + std::to_string(r) + "-" +
                       hosts.ns("a").substr(hosts.ns("a").rfind('-') + 1) + "/statistics/tx_bytes")
                          .c_str(),
                      "r");
    ASSERT_NE(f, nullptr);
    unsigned long long tx = 0;
    EXPECT_EQ(std::fscanf(f, "%llu", &tx), 1);
    ::pclose(f);
    EXPECT_GT(tx, n / 4) << "rail " << r;
  }
  rdmad_flow_close(fa);
}

}  // namespace
}  // namespace rdmad::test
