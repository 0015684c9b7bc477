// RoCEv2 source ports: each QP of a soft NIC sends from a port in 49152-65535 picked by a hash of
// the QP pair, QPs spread over several ports (ECMP entropy), and the ICRC a receiver checks covers
// the port the packet really came from. Observed from a plain UDP socket standing in for the peer.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <set>

#include "rdmad/roce/packet.h"
#include "unit/verbs/verbs_test_util.h"

namespace rdmad::verbs::test {
namespace {

struct FakePeer {
  int fd = -1;
  uint16_t port = 0;
  FakePeer() {
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    socklen_t len = sizeof sa;
    getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    port = ntohs(sa.sin_port);
  }
  ~FakePeer() { close(fd); }
};

// Sends one 1-byte WRITE on each of `qps` QPs of a NIC towards the fake peer and returns, per
// destination QPN, the UDP source port of the first packet the peer got (ICRC verified).
std::map<uint32_t, uint16_t> source_ports(const DeviceConfig& config, int qps) {
  std::string skip;
  auto dev = open_device("soft", config, &skip);
  auto pd = std::move(dev->alloc_pd().value());
  auto cq = std::move(dev->create_cq(256).value());
  FakePeer peer;
  PortInfo peer_port;
  peer_port.gid = Gid::from_ip("127.0.0.1").value();
  peer_port.udp_port = peer.port;
  uint8_t byte = 7;
  auto mr = std::move(pd->reg_mr(&byte, 1, 0).value());
  std::vector<std::unique_ptr<QueuePair>> list;
  for (int i = 0; i < qps; ++i) {
    QpInitAttr ia;
    ia.send_cq = ia.recv_cq = cq.get();
    list.push_back(std::move(pd->create_qp(ia).value()));
    ConnectOptions o;
    EXPECT_TRUE(connect_qp(*list.back(), peer_port, 0x500 + static_cast<uint32_t>(i), 0, 0, o).is_ok());
    SendWr w;
    w.opcode = WrOpcode::kRdmaWrite;
    w.sge = {reinterpret_cast<uint64_t>(&byte), 1, mr->lkey()};
    w.remote_addr = 0x1000;
    w.rkey = 1;
    EXPECT_TRUE(list.back()->post_send({&w, 1}).is_ok());
  }
  std::map<uint32_t, uint16_t> out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (out.size() < static_cast<size_t>(qps) && std::chrono::steady_clock::now() < deadline) {
    pollfd p{peer.fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    uint8_t buf[2048];
    sockaddr_in from{};
    socklen_t len = sizeof from;
    ssize_t n = recvfrom(peer.fd, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len);
    if (n <= 0) continue;
    roce::IpUdpInfo ip;
    ip.src = roce::IpAddr::v4(ntohl(from.sin_addr.s_addr));
    ip.dst = ip.src;
    ip.src_port = ntohs(from.sin_port);
    ip.dst_port = peer.port;
    roce::Packet pkt;
    EXPECT_EQ(roce::decode_datagram({buf, static_cast<size_t>(n)}, &ip, &pkt), roce::DecodeError::kOk)
        << "ICRC over the real source port";
    out.emplace(pkt.bth.dest_qp, ip.src_port);
  }
  return out;
}

TEST(SourcePort, QpsSpreadOverPortsInTheRoceRange) {
  DeviceConfig c = soft_config();
  c.source_ports = 8;
  auto ports = source_ports(c, 16);
  ASSERT_EQ(ports.size(), 16u);
  std::set<uint16_t> distinct;
  for (auto [qpn, port] : ports) {
    EXPECT_GE(port, 49152) << "QP " << qpn;
    distinct.insert(port);
  }
  EXPECT_GE(distinct.size(), 4u) << "16 QPs over 8 source ports";
}

TEST(SourcePort, ZeroSourcePortsSendFromTheListeningPort) {
  DeviceConfig c = soft_config();
  c.source_ports = 0;
  auto ports = source_ports(c, 4);
  ASSERT_EQ(ports.size(), 4u);
  std::set<uint16_t> distinct;
  for (auto [qpn, port] : ports) distinct.insert(port);
  EXPECT_EQ(distinct.size(), 1u);
}

}  // namespace
}  // namespace rdmad::verbs::test
