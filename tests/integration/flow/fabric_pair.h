// Two daemons with two soft NICs each, the path between their NICs 0 through rdmad-fabric (which
// can congest it, or cut it by being killed): the failover tests' cluster.
#pragma once

#include "flow_cluster.h"

namespace rdmad::test {

// A fabric port listen -> forward (rate "0" = unlimited) and its reverse port (unlimited: it carries
// the ACKs), one rdmad-fabric process restartable on the same ports. Both directions cross it: a
// soft QP accepts packets only from its peer's address or its own NIC's relay, so the NICs at both
// ends advertise their port (a one-way relay leaves the far end's replies from an address its peer
// QP was not connected to).
class Fabric {
 public:
  // `port_keys`: more keys of the forward port (",drop_opcode=4"); `reverse_keys`: of the reverse one.
  Fabric(int listen_port, std::string forward, int reverse_port, std::string reverse_forward, std::string rate,
         std::string buffer = "1MB", std::string port_keys = "", std::string reverse_keys = "")
      : listen_port_(listen_port), forward_(std::move(forward)), reverse_port_(reverse_port),
        reverse_forward_(std::move(reverse_forward)), rate_(std::move(rate)), buffer_(std::move(buffer)),
        port_keys_(std::move(port_keys)), reverse_keys_(std::move(reverse_keys)) {}
  bool start() {
    proc_ = std::make_unique<Subprocess>(std::vector<std::string>{
        binary("tools/fabric/rdmad-fabric"), "--stats-interval-ms", "0", "--port",
        fmt::format("name=p0,listen=127.0.0.1:{},forward={},rate={},buffer={}{}", listen_port_, forward_, rate_,
                    buffer_, port_keys_),
        "--port",
        fmt::format("name=p1,listen=127.0.0.1:{},forward={},rate=0{}", reverse_port_, reverse_forward_, reverse_keys_)});
    return proc_->wait_for_output("127.0.0.1:" + std::to_string(reverse_port_), 10s);
  }
  void cut() { proc_.reset(); }  // SIGKILL: datagrams to the ports vanish
  std::string address() const { return fmt::format("127.0.0.1:{}", listen_port_); }
  std::string reverse_address() const { return fmt::format("127.0.0.1:{}", reverse_port_); }

 private:
  int listen_port_;
  std::string forward_;
  int reverse_port_;
  std::string reverse_forward_;
  std::string rate_;
  std::string buffer_;
  std::string port_keys_;
  std::string reverse_keys_;
  std::unique_ptr<Subprocess> proc_;
};

inline const std::string kFastRecovery =
    "[flow]\nrejoin_backoff_min_ms = 50\nrejoin_backoff_max_ms = 400\nchunk_bytes = 262144\nlane_window_chunks = 4\n";

// node-a (two NICs) -> node-b (two NICs), the path between the NICs 0 through a fabric port each way.
struct FabricPair {
  std::unique_ptr<Fabric> fabric;
  std::unique_ptr<Pair> pair;
  rdmad_flow* fa = nullptr;

  // `port_keys`, `reverse_keys`: more keys of the fabric's a -> b and b -> a ports (Fabric);
  // `a_qp_timeout`: node-a's own QP timeout exponent (-1: `qp_timeout`, as node-b's).
  explicit FabricPair(const std::string& rate, int qp_timeout = 14, const std::string& buffer = "1MB",
                      const std::string& extra = "", const std::string& port_keys = "",
                      const std::string& reverse_keys = "", int a_qp_timeout = -1) {
    NodeSpec b = two_nic_node("node-b", 21, kFastRecovery + extra);
    b.qp_timeout = qp_timeout;
    b.nics[0].udp_port = free_port(SOCK_DGRAM);
    NodeSpec a = two_nic_node("node-a", 11, kFastRecovery + extra);
    a.qp_timeout = a_qp_timeout >= 0 ? a_qp_timeout : qp_timeout;
    a.nics[0].udp_port = free_port(SOCK_DGRAM);
    fabric = std::make_unique<Fabric>(free_port(SOCK_DGRAM), fmt::format("127.0.0.21:{}", b.nics[0].udp_port),
                                      free_port(SOCK_DGRAM), fmt::format("127.0.0.11:{}", a.nics[0].udp_port), rate,
                                      buffer, port_keys, reverse_keys);
    b.nics[0].advertise = fabric->address();
    a.nics[0].advertise = fabric->reverse_address();
    pair = std::make_unique<Pair>(std::move(a), std::move(b));
  }
  ~FabricPair() { rdmad_flow_close(fa); }
  // Starts the fabric and both daemons and opens `fa` from node-a to node-b on the NICs of
  // `nic_mask` (0: every NIC).
  bool start(uint32_t nic_mask = 0) {
    if (!fabric->start() || !pair->start()) return false;
    if (rdmad_flow_open_nics(a()->client(), "node-b", nullptr, nic_mask, &fa) != RDMAD_OK) return false;
    return rdmad_flow_wait_connected(fa, 10000) == RDMAD_OK;
  }
  Node* a() { return pair->a.get(); }
  Node* b() { return pair->b.get(); }
  rdmad_remote export_to_a(const Buffer& dst, size_t n) { return export_and_import(*b(), dst, n, *a(), fa); }
  // Writes `n` bytes of pattern `seed` from node-a into an export of node-b's over `fa`, waits for
  // the completion and checks the bytes arrived exactly.
  void write_byte_exact(size_t n, uint64_t seed) {
    Buffer src(a()->client(), n, kAllAccess);
    Buffer dst(b()->client(), n, kAllAccess);
    fill(src.data(), n, seed);
    const rdmad_remote remote = export_to_a(dst, n);
    ASSERT_EQ(rdmad_flow_write(fa, 1, src.mr, 0, &remote, 0, n), RDMAD_OK);
    auto c = wait_completion(fa, std::chrono::seconds(120));
    ASSERT_TRUE(c.has_value()) << a()->output();
    EXPECT_EQ(c->status, RDMAD_OK);
    EXPECT_EQ(first_difference(src.data(), dst.data(), n), -1);
  }
  double nic_bytes(int i) {
    return a()->metric(fmt::format("rdmad_balancer_bytes_sent_total{{device=\"node-a{}\"}}", i)).value_or(0);
  }
};

}  // namespace rdmad::test
