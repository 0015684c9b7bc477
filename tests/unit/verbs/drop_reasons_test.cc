// Every packet the soft datapath does not use is counted once, under its reason
// (NicCounters::rx_dropped_by_reason), and rx_dropped is their sum: a datagram too short for a BTH,
// an unknown opcode, a bad ICRC, an unknown QPN (right table entry, wrong number), a QP in INIT, a
// sender that is not the QP's peer, an ACK for a PSN never sent.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "fake_peer.h"
#include "verbs_test_util.h"

namespace rdmad::verbs::test {
namespace {

uint64_t dropped(const NicCounters& c, RxDropReason r) { return c.rx_dropped_by_reason[static_cast<size_t>(r)]; }

TEST(DropReasons, EachDropIsCountedOnceUnderItsReason) {
  Endpoint e;
  FakePeer peer;
  ConnectOptions o;
  o.sq_psn = 100;
  o.rq_psn = 500;
  ASSERT_NO_FATAL_FAILURE(open_connected(e, peer, o));
  QpInitAttr ia;
  ia.send_cq = ia.recv_cq = e.scq.get();
  auto idle = std::move(e.pd->create_qp(ia).value());
  QpAttr init;
  init.state = QpState::kInit;
  ASSERT_TRUE(idle->modify(init, kQpState | kQpAccessFlags).ok());
  const uint16_t nic = e.dev->query_port(1).value().udp_port;
  const uint32_t qpn = e.qp->qp_num();

  roce::Packet write;  // in sequence, to a key nobody has: it would fail the QP if it were taken
  write.bth.opcode = roce::Opcode::kWriteOnly;
  write.bth.dest_qp = qpn;
  write.bth.psn = 500;
  const uint8_t payload[16] = {};
  write.payload = payload;
  write.reth = {0x1000, 0x5555, sizeof payload};
  std::vector<uint8_t> d = peer.encode(write, nic);
  ASSERT_FALSE(d.empty());
  const uint8_t short_datagram[8] = {};
  ASSERT_TRUE(peer.send_raw(short_datagram, nic));  // truncated
  std::vector<uint8_t> bad_opcode = d;
  bad_opcode[0] = 0x1F;  // not an RC opcode
  ASSERT_TRUE(peer.send_raw(bad_opcode, nic));  // malformed
  std::vector<uint8_t> bad_icrc = d;
  bad_icrc.back() ^= 1;
  ASSERT_TRUE(peer.send_raw(bad_icrc, nic));  // bad_icrc
  roce::Packet p = write;
  p.bth.dest_qp = qpn ^ 0x400;  // same table entry, another number
  ASSERT_TRUE(peer.send(p, nic));  // unknown_qp
  p.bth.dest_qp = idle->qp_num();
  ASSERT_TRUE(peer.send(p, nic));  // bad_state
  FakePeer stranger(FakePeer::kOutsideRoceSourcePorts);
  ASSERT_TRUE(stranger.send(write, nic));  // wrong_source
  roce::Packet ack;
  ack.bth.opcode = roce::Opcode::kAcknowledge;
  ack.bth.dest_qp = qpn;
  ack.bth.psn = 100 + 1000;  // nothing was sent
  ack.aeth = roce::Aeth::ack(0);
  ASSERT_TRUE(peer.send(ack, nic));  // out_of_window

  NicCounters c;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    c = e.dev->counters();
    if (c.rx_dropped >= 7) break;
    std::this_thread::yield();
  } while (std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(c.rx_dropped, 7u);
  for (size_t r = 0; r < kRxDropReasons; ++r) {
    EXPECT_EQ(c.rx_dropped_by_reason[r], 1u) << kRxDropReasonNames[r];
  }
  EXPECT_EQ(dropped(c, RxDropReason::kWrongSource), 1u);
  EXPECT_EQ(c.resp_remote_access_errors, 0u) << "the stranger's WRITE reached the responder";
  EXPECT_EQ(e.qp->query().state, QpState::kRts);
}

}  // namespace
}  // namespace rdmad::verbs::test
