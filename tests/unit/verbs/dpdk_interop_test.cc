// A dpdk NIC and a soft NIC on one link: the dpdk NIC takes one end of a veth pair
// (net_af_packet), the soft NIC's UDP socket is bound to an address of the other end, in a network
// namespace of its own, so the kernel's IP stack carries its side. WRITE, READ and SEND both ways,
// byte-exact. Neither side is told the other's MAC: the dpdk NIC resolves the kernel's by ARP
// (IPv6: neighbour discovery) and answers the kernel's requests for its own address.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dpdk_test_util.h"
#include "verbs_test_util.h"

namespace rdmad::verbs::test {
namespace {

struct Side {
  const char* soft_cidr;
  const char* soft_ip;
  const char* dpdk_ip;
};

class DpdkInterop : public ::testing::TestWithParam<Side> {
 protected:
  void SetUp() override {
    std::string why;
    veth_ = VethPair::create(&why, true, GetParam().soft_cidr);
    if (!veth_) GTEST_SKIP() << why;
    {
      InNetns in(veth_->ns());
      ASSERT_TRUE(in.ok()) << "setns into " << veth_->ns();
      DeviceConfig s = soft_config(GetParam().soft_ip);
      s.backend_options["udp_port"] = 4791;
      // The kernel splits a UDP_SEGMENT run into packets with IP ids 1, 2, ... that the soft
      // sender's ICRC did not cover; the dpdk NIC sees and checks the ids (docs/verbs.md).
      s.backend_options["udp_offload"] = false;
      auto soft = registry().open("soft", s);
      ASSERT_TRUE(soft.ok()) << soft.status().message();
      make_endpoint(soft_, std::move(soft.value()));
    }
    DeviceConfig d;
    d.address = GetParam().dpdk_ip;
    static int vdev = 0;  // a vdev name once per process
    d.backend_options = {{"devargs", "net_af_packet" + std::to_string(vdev++) + ",iface=" + veth_->a() +
                                         ",framesz=4352,blocksz=69632"},
                         {"mtu", int64_t{9000}},
                         {"mbufs", int64_t{4095}},
                         {"cc_enabled", false}};
    auto dpdk = registry().open("dpdk", d);
    ASSERT_TRUE(dpdk.ok()) << dpdk.status().message();
    make_endpoint(dpdk_, std::move(dpdk.value()));
    ASSERT_NO_FATAL_FAILURE(kernel_resolves_dpdk());
    ConnectOptions o;
    o.mtu = 4096;
    connect_pair(dpdk_, soft_, o);
  }
  void TearDown() override {
    dpdk_.reset();
    soft_.reset();
  }

  /// The kernel asks for the dpdk side's MAC before the dpdk side has sent anything (it would learn
  /// it from the dpdk side's own request): a datagram to a port nobody listens on makes it resolve.
  void kernel_resolves_dpdk() {
    const std::string ip = GetParam().dpdk_ip;
    const bool v6 = ip.find(':') != std::string::npos;
    {
      InNetns in(veth_->ns());
      ASSERT_TRUE(in.ok());
      const int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      ASSERT_GE(fd, 0);
      sockaddr_storage sa{};
      socklen_t len;
      if (v6) {
        auto* a = reinterpret_cast<sockaddr_in6*>(&sa);
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(9);
        inet_pton(AF_INET6, ip.c_str(), &a->sin6_addr);
        len = sizeof *a;
      } else {
        auto* a = reinterpret_cast<sockaddr_in*>(&sa);
        a->sin_family = AF_INET;
        a->sin_port = htons(9);
        inet_pton(AF_INET, ip.c_str(), &a->sin_addr);
        len = sizeof *a;
      }
      EXPECT_EQ(sendto(fd, "x", 1, 0, reinterpret_cast<sockaddr*>(&sa), len), 1);
      close(fd);
    }
    const std::string want = "lladdr " + veth_->mac(false);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    std::string entry;
    while (std::chrono::steady_clock::now() < deadline && entry.find(want) == std::string::npos) {
      entry = veth_->b_neighbor(ip);
    }
    ASSERT_NE(entry.find(want), std::string::npos) << "the kernel never resolved " << ip << ": '" << entry << "'";
    const auto port = dpdk::port_counters(*dpdk_.dev);
    ASSERT_TRUE(port);
    EXPECT_GE(port->neighbor_replies, 1u) << "the kernel learnt the MAC, yet the dpdk side sent no reply";
  }

  /// WRITE `n` bytes from `from` into `to`, READ them back into `from`, SEND `n` more: byte-exact.
  void exchange(Endpoint& from, Endpoint& to, size_t n, uint32_t seed) {
    std::vector<uint8_t> src(n), remote(n, 0), back(n, 0), sent(n), got(n + 64, 0xEE);
    fill_pattern(src, seed);
    fill_pattern(sent, seed + 1);
    auto smr = std::move(from.pd->reg_mr(src.data(), n, 0).value());
    auto bmr = std::move(from.pd->reg_mr(back.data(), n, kAccessLocalWrite).value());
    auto tmr = std::move(from.pd->reg_mr(sent.data(), n, 0).value());
    auto rmr = std::move(
        to.pd->reg_mr(remote.data(), n, kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead).value());
    auto gmr = std::move(to.pd->reg_mr(got.data(), got.size(), kAccessLocalWrite).value());
    RecvWr r;
    r.wr_id = 9;
    r.sge = {reinterpret_cast<uint64_t>(got.data()), static_cast<uint32_t>(got.size()), gmr->lkey()};
    ASSERT_TRUE(to.qp->post_recv({&r, 1}).ok());
    SendWr w[3];
    w[0].wr_id = 1;
    w[0].opcode = WrOpcode::kRdmaWrite;
    w[0].sge = {reinterpret_cast<uint64_t>(src.data()), static_cast<uint32_t>(n), smr->lkey()};
    w[0].remote_addr = reinterpret_cast<uint64_t>(remote.data());
    w[0].rkey = rmr->rkey();
    w[1] = w[0];
    w[1].wr_id = 2;
    w[1].opcode = WrOpcode::kRdmaRead;
    w[1].sge = {reinterpret_cast<uint64_t>(back.data()), static_cast<uint32_t>(n), bmr->lkey()};
    w[2].wr_id = 3;
    w[2].opcode = WrOpcode::kSend;
    w[2].sge = {reinterpret_cast<uint64_t>(sent.data()), static_cast<uint32_t>(n), tmr->lkey()};
    ASSERT_TRUE(from.qp->post_send(w).ok());
    auto wcs = wait_completions(*from.scq, 3);
    ASSERT_EQ(wcs.size(), 3u);
    for (const WorkCompletion& wc : wcs) EXPECT_EQ(wc.status, WcStatus::kSuccess) << "wr " << wc.wr_id;
    auto rwcs = wait_completions(*to.rcq, 1);
    ASSERT_EQ(rwcs.size(), 1u);
    EXPECT_EQ(rwcs[0].byte_len, n);
    EXPECT_TRUE(src == remote) << "WRITE";
    EXPECT_TRUE(src == back) << "READ";
    EXPECT_TRUE(std::equal(sent.begin(), sent.end(), got.begin())) << "SEND";
  }

  std::unique_ptr<VethPair> veth_;
  Endpoint soft_, dpdk_;
};

TEST_P(DpdkInterop, WriteReadSendBothWaysWithNeighboursResolvedOnTheLink) {
  ASSERT_NO_FATAL_FAILURE(exchange(dpdk_, soft_, 100'000, 1));
  ASSERT_NO_FATAL_FAILURE(exchange(soft_, dpdk_, 100'000, 2));
  ASSERT_NO_FATAL_FAILURE(exchange(dpdk_, soft_, 3000, 3));
  ASSERT_NO_FATAL_FAILURE(exchange(soft_, dpdk_, 3000, 4));
  // Nothing either side received was dropped (an ICRC the other computed differently, a header).
  EXPECT_EQ(soft_.dev->counters().rx_dropped, 0u);
  EXPECT_EQ(dpdk_.dev->counters().rx_dropped, 0u);
  const auto port = dpdk::port_counters(*dpdk_.dev);
  ASSERT_TRUE(port);
  EXPECT_GE(port->neighbor_requests, 1u) << "the dpdk side resolved the kernel's MAC itself";
  EXPECT_EQ(port->bad_ip_checksum, 0u);
}

INSTANTIATE_TEST_SUITE_P(Dpdk, DpdkInterop,
                         ::testing::Values(Side{"10.78.0.1/24", "10.78.0.1", "10.78.0.2"},
                                           Side{"fd00:78::1/64", "fd00:78::1", "fd00:78::2"}),
                         [](const ::testing::TestParamInfo<Side>& i) {
                           return std::string(i.param.dpdk_ip).find(':') == std::string::npos ? "Ipv4" : "Ipv6";
                         });

}  // namespace
}  // namespace rdmad::verbs::test
