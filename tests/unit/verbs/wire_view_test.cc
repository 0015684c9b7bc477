// What a peer sees of a soft NIC on the wire, observed from a plain UDP socket standing in for it:
// - RoCEv2 source ports: each QP sends from a port in 49152-65535 picked by a hash of the QP pair,
//   QPs spread over several ports (ECMP entropy), and the ICRC covers the port the packet really
//   came from;
// - max_rd_atomic bounds the READ requests in flight, and an answer lets the next one go.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <set>

#include "rdmad/roce/packet.h"
#include "unit/verbs/fake_peer.h"
#include "unit/verbs/verbs_test_util.h"

namespace rdmad::verbs::test {
namespace {

// Sends one 1-byte WRITE on each of `qps` QPs of a NIC towards the fake peer and returns, per
// destination QPN, the UDP source port of the first packet the peer got (ICRC verified).
std::map<uint32_t, uint16_t> source_ports(const DeviceConfig& config, int qps) {
  std::string skip;
  auto dev = open_device("soft", config, &skip);
  auto pd = std::move(dev->alloc_pd().value());
  auto cq = std::move(dev->create_cq(256).value());
  FakePeer peer;
  const PortInfo peer_port = port_of(peer);
  uint8_t byte = 7;
  auto mr = std::move(pd->reg_mr(&byte, 1, 0).value());
  std::vector<std::unique_ptr<QueuePair>> list;
  for (int i = 0; i < qps; ++i) {
    QpInitAttr ia;
    ia.send_cq = ia.recv_cq = cq.get();
    list.push_back(std::move(pd->create_qp(ia).value()));
    ConnectOptions o;
    EXPECT_TRUE(connect_qp(*list.back(), peer_port, 0x500 + static_cast<uint32_t>(i), 0, 0, o).ok());
    SendWr w;
    w.opcode = WrOpcode::kRdmaWrite;
    w.sge = {reinterpret_cast<uint64_t>(&byte), 1, mr->lkey()};
    w.remote_addr = 0x1000;
    w.rkey = 1;
    EXPECT_TRUE(list.back()->post_send({&w, 1}).ok());
  }
  std::map<uint32_t, uint16_t> out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  uint8_t buf[2048];
  roce::Packet pkt;
  sockaddr_in from{};
  while (out.size() < static_cast<size_t>(qps) && peer.receive(&pkt, &from, buf, sizeof buf, deadline)) {
    out.emplace(pkt.bth.dest_qp, ntohs(from.sin_port));
  }
  return out;
}

TEST(SourcePort, QpsSpreadOverPortsInTheRoceRange) {
  DeviceConfig c = soft_config();
  c.backend_options["source_ports"] = 8;
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
  c.backend_options["source_ports"] = 0;
  auto ports = source_ports(c, 4);
  ASSERT_EQ(ports.size(), 4u);
  std::set<uint16_t> distinct;
  for (auto [qpn, port] : ports) distinct.insert(port);
  EXPECT_EQ(distinct.size(), 1u);
}

// Five 64-byte READs posted at once: with max_rd_atomic 2 only two requests leave; answering the
// first lets the third go. With 16 all five leave.
TEST(WireView, MaxRdAtomicBoundsReadRequestsInFlight) {
  for (uint8_t limit : {uint8_t{2}, uint8_t{16}}) {
    std::string skip;
    auto dev = open_device("soft", soft_config(), &skip);
    auto pd = std::move(dev->alloc_pd().value());
    auto cq = std::move(dev->create_cq(256).value());
    FakePeer peer;
    QpInitAttr ia;
    ia.send_cq = ia.recv_cq = cq.get();
    auto qp = std::move(pd->create_qp(ia).value());
    ConnectOptions o;
    o.max_rd_atomic = limit;
    o.timeout = 18;  // ~1 s: no retransmission during the test
    ASSERT_TRUE(connect_qp(*qp, port_of(peer), 0x600, 100, 0, o).ok());
    std::vector<uint8_t> local(5 * 64, 0);
    auto mr = std::move(pd->reg_mr(local.data(), local.size(), kAccessLocalWrite).value());
    for (uint64_t i = 0; i < 5; ++i) {
      SendWr w;
      w.wr_id = i;
      w.opcode = WrOpcode::kRdmaRead;
      w.sge = {reinterpret_cast<uint64_t>(local.data() + i * 64), 64, mr->lkey()};
      w.remote_addr = 0x10000 + i * 64;
      w.rkey = 7;
      ASSERT_TRUE(qp->post_send({&w, 1}).ok());
    }
    const size_t expect = limit < 5 ? limit : 5;
    std::set<uint32_t> psns;
    uint8_t buf[2048];
    roce::Packet pkt;
    sockaddr_in from{};
    // Everything the QP may send now, then a quiet spell long enough for anything it must not.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    while (peer.receive(&pkt, &from, buf, sizeof buf, deadline)) {
      ASSERT_EQ(pkt.bth.opcode, roce::Opcode::kReadRequest);
      psns.insert(pkt.bth.psn);
    }
    EXPECT_EQ(psns.size(), expect) << "max_rd_atomic " << int{limit};
    if (limit >= 5) continue;

    // Answer the first request (PSN 100) with a READ Response Only from the peer's address.
    std::vector<uint8_t> data(64, 0xAB);
    roce::Packet resp;
    resp.bth.opcode = roce::Opcode::kReadResponseOnly;
    resp.bth.dest_qp = qp->qp_num();
    resp.bth.psn = 100;
    resp.aeth.syndrome = 0x1F;  // ACK, no credit count
    resp.aeth.msn = 1;
    resp.payload = data;
    ASSERT_TRUE(peer.send(resp, dev->query_port(1).value().udp_port));
    deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    bool third = false;
    while (!third && peer.receive(&pkt, &from, buf, sizeof buf, deadline)) third = pkt.bth.psn == 102;
    EXPECT_TRUE(third) << "the answer to the first READ did not release the third";
    WorkCompletion wc;
    deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    size_t got = 0;
    while (got == 0 && std::chrono::steady_clock::now() < deadline) got = cq->poll({&wc, 1});
    ASSERT_EQ(got, 1u);
    EXPECT_EQ(wc.wr_id, 0u);
    EXPECT_EQ(wc.status, WcStatus::kSuccess);
    EXPECT_EQ(local[0], 0xAB);
    EXPECT_EQ(local[63], 0xAB);
    qp.reset();
  }
}

}  // namespace
}  // namespace rdmad::verbs::test
