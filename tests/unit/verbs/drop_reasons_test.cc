// Every packet the soft datapath does not use is counted once, under its reason
// (NicCounters::rx_dropped_by_reason), and rx_dropped is their sum: a datagram too short for a BTH,
// an unknown opcode, a bad ICRC, an unknown QPN (right table entry, wrong number), a QP in INIT, a
// sender that is not the QP's peer, an ACK for a PSN never sent; and what the socket itself dropped
// while the datapath did not read it (queue_overflow).
#include <gtest/gtest.h>

#include <atomic>
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
    if (static_cast<RxDropReason>(r) == RxDropReason::kQueueOverflow) continue;  // the next test's
    EXPECT_EQ(c.rx_dropped_by_reason[r], 1u) << kRxDropReasonNames[r];
  }
  EXPECT_EQ(dropped(c, RxDropReason::kQueueOverflow), 0u);
  EXPECT_EQ(dropped(c, RxDropReason::kWrongSource), 1u);
  EXPECT_EQ(c.resp_remote_access_errors, 0u) << "the stranger's WRITE reached the responder";
  EXPECT_EQ(e.qp->query().state, QpState::kRts);
}

// A datapath that does not read its socket (stalled here by a command that blocks it) lets the
// kernel drop what does not fit the socket's buffer: the NIC counts those as queue_overflow (the
// socket's SO_RXQ_OVFL count, which comes with the next datagram queued after the drops).
TEST(DropReasons, WhatTheFullSocketDroppedIsQueueOverflow) {
  std::string skip;
  DeviceConfig c = soft_config();
  c.backend_options["socket_buffer_bytes"] = int64_t{4096};
  Endpoint e;
  make_endpoint(e, open_device("soft", c, &skip));
  ASSERT_TRUE(e.dev) << skip;
  FakePeer peer;
  const uint16_t nic = e.dev->query_port(1).value().udp_port;
  std::vector<uint8_t> datagram(1024, 0x11);  // to no QP: what is read is dropped as malformed/unknown
  std::atomic<bool> release{false}, stalled{false};
  std::thread stall([&] {
    (void)e.dev->run_on_datapath_for_test([&] {
      stalled = true;
      while (!release) std::this_thread::yield();
    });
  });
  while (!stalled) std::this_thread::yield();
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(peer.send_raw(datagram, nic));
  release = true;
  stall.join();
  // One more, queued after the drops, carries the socket's drop count up to the datapath.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  uint64_t overflow = 0;
  while ((overflow = dropped(e.dev->counters(), RxDropReason::kQueueOverflow)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(peer.send_raw(datagram, nic));
    std::this_thread::yield();
  }
  EXPECT_GT(overflow, 100u) << "an 8 KiB socket buffer holds a few of 200 datagrams of 1 KiB";
  const NicCounters n = e.dev->counters();
  uint64_t sum = 0;
  for (uint64_t v : n.rx_dropped_by_reason) sum += v;
  EXPECT_EQ(n.rx_dropped, sum);
}

}  // namespace
}  // namespace rdmad::verbs::test
