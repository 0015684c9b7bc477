// Soft NICs talking through the fabric emulator (in-process): with 1% loss, reordering and
// duplication every byte arrives and completions stay in order; and four DCQCN senders into one
// receiver behind a 1 Gb/s port converge to the fair share.
//
// The emulator is a UDP proxy, not an L3 switch: packets leave it from its own socket, so the
// IP/UDP headers the sender's ICRC covered are not the ones the receiver sees. It re-seals them
// (recomputes the ICRC for the headers it sends), and the NICs behind it verify every packet as
// always; each names its fabric port as its relay, the one source its QPs accept besides the peer.
#include <gtest/gtest.h>

#include <numeric>

#include "unit/verbs/verbs_test_util.h"
#include "rdmad/tools/fabric/fabric.h"
#include "support/free_port.h"

namespace rdmad::verbs::test {
namespace {

fabric::Endpoint endpoint_of(const Device& dev) {
  return fabric::Endpoint::parse("127.0.0.1:" + std::to_string(dev.query_port(1).value().udp_port));
}

// A NIC reached through the fabric port listening on 127.0.0.1:relay_port.
DeviceConfig behind_fabric(bool cc, int relay_port, uint32_t line_rate_mbps = 100000) {
  DeviceConfig c = soft_config();
  c.backend_options["relay_address"] = "127.0.0.1";
  c.backend_options["relay_udp_port"] = static_cast<uint16_t>(relay_port);
  c.backend_options["cc_enabled"] = cc;
  c.backend_options["line_rate_mbps"] = line_rate_mbps;
  return c;
}

TEST(Fabric, LossReorderDuplicationEveryByteInOrder) {
  std::string skip;
  Endpoint a, b;
  const int to_b = rdmad::test::free_port(SOCK_DGRAM), to_a = rdmad::test::free_port(SOCK_DGRAM);
  make_endpoint(a, open_device("soft", behind_fabric(false, to_a), &skip), 64);
  make_endpoint(b, open_device("soft", behind_fabric(false, to_b), &skip), 64);
  fabric::FabricConfig fc;
  fc.stats_interval_ms = 0;
  for (Device* to : {b.dev.get(), a.dev.get()}) {
    fabric::PortConfig p;
    p.listen = fabric::Endpoint::parse("127.0.0.1:" + std::to_string(to == b.dev.get() ? to_b : to_a));
    p.forward = endpoint_of(*to);
    p.buffer_bytes = 16u << 20;
    p.ecn = false;
    p.loss = 0.01;
    p.duplicate = 0.01;
    p.reorder = 0.01;
    p.reorder_hold_us = 200;
    p.seed = 7 + fc.ports.size();
    fc.ports.push_back(p);
  }
  fabric::Fabric fab(fc);
  fab.start();
  ConnectOptions o;
  o.mtu = 1024;
  // 67 ms: tail losses still recover in well under a second, and a datapath thread that a loaded
  // machine does not schedule for tens of ms does not use up the retries.
  o.timeout = 14;
  PortInfo pa = a.dev->query_port(1).value(), pb = b.dev->query_port(1).value();
  pb.udp_port = fab.listen_endpoint(0).port();  // a → fabric port 0 → b
  pa.udp_port = fab.listen_endpoint(1).port();  // b → fabric port 1 → a
  ASSERT_TRUE(connect_qp(*a.qp, pb, b.qp->qp_num(), o.sq_psn, o.rq_psn, o).ok());
  ASSERT_TRUE(connect_qp(*b.qp, pa, a.qp->qp_num(), o.rq_psn, o.sq_psn, o).ok());

  constexpr uint32_t kBig = 4u << 20;
  std::vector<uint8_t> src(kBig), remote(kBig, 0), back(kBig, 0), msg(300'000), rbuf(300'000, 0);
  fill_pattern(src, 1);
  fill_pattern(msg, 2);
  std::vector<uint8_t> readable(kBig);
  fill_pattern(readable, 3);
  auto smr = std::move(a.pd->reg_mr(src.data(), kBig, 0).value());
  auto bmr = std::move(a.pd->reg_mr(back.data(), kBig, kAccessLocalWrite).value());
  auto mmr = std::move(a.pd->reg_mr(msg.data(), msg.size(), 0).value());
  auto rmr = std::move(b.pd->reg_mr(remote.data(), kBig, kAccessLocalWrite | kAccessRemoteWrite).value());
  auto qmr = std::move(b.pd->reg_mr(readable.data(), kBig, kAccessRemoteRead).value());
  auto rbmr = std::move(b.pd->reg_mr(rbuf.data(), rbuf.size(), kAccessLocalWrite).value());
  RecvWr r;
  r.wr_id = 100;
  r.sge = {reinterpret_cast<uint64_t>(rbuf.data()), static_cast<uint32_t>(rbuf.size()), rbmr->lkey()};
  ASSERT_TRUE(b.qp->post_recv({&r, 1}).ok());

  std::vector<SendWr> wrs;
  for (uint32_t i = 0; i < 4; ++i) {  // WRITE in four 1 MiB pieces
    SendWr w;
    w.opcode = WrOpcode::kRdmaWrite;
    w.sge = {reinterpret_cast<uint64_t>(src.data()) + i * (kBig / 4), kBig / 4, smr->lkey()};
    w.remote_addr = reinterpret_cast<uint64_t>(remote.data()) + i * (kBig / 4);
    w.rkey = rmr->rkey();
    wrs.push_back(w);
  }
  SendWr rd;
  rd.opcode = WrOpcode::kRdmaRead;
  rd.sge = {reinterpret_cast<uint64_t>(back.data()), kBig, bmr->lkey()};
  rd.remote_addr = reinterpret_cast<uint64_t>(readable.data());
  rd.rkey = qmr->rkey();
  wrs.push_back(rd);
  SendWr s;
  s.opcode = WrOpcode::kSendWithImm;
  s.imm_data = 99;
  s.sge = {reinterpret_cast<uint64_t>(msg.data()), static_cast<uint32_t>(msg.size()), mmr->lkey()};
  wrs.push_back(s);
  for (size_t i = 0; i < wrs.size(); ++i) wrs[i].wr_id = i;
  ASSERT_TRUE(a.qp->post_send(wrs).ok());
  auto wcs = wait_completions(*a.scq, wrs.size(), std::chrono::seconds(60));
  ASSERT_EQ(wcs.size(), wrs.size());
  for (size_t i = 0; i < wcs.size(); ++i) {
    EXPECT_EQ(wcs[i].wr_id, i) << "completions out of order";
    EXPECT_EQ(wcs[i].status, WcStatus::kSuccess) << "wr " << i << ": " << to_string(wcs[i].status);
  }
  if (HasFailure()) {
    NicCounters ca = a.dev->counters(), cb = b.dev->counters();
    ADD_FAILURE() << "a: timeouts " << ca.local_ack_timeout_err << " seq naks " << ca.packet_seq_err << " implied "
                  << ca.implied_nak_seq_err << " retx " << ca.retransmitted_packets << " rx_dropped " << ca.rx_dropped
                  << "; b: dup " << cb.duplicate_request << " ooo " << cb.out_of_sequence << " rx_dropped "
                  << cb.rx_dropped;
  }
  auto rw = wait_completions(*b.rcq, 1);
  ASSERT_EQ(rw.size(), 1u);
  EXPECT_EQ(rw[0].imm_data, 99u);
  EXPECT_TRUE(src == remote) << "WRITE bytes differ";
  EXPECT_TRUE(readable == back) << "READ bytes differ";
  EXPECT_TRUE(msg == rbuf) << "SEND bytes differ";
  auto st0 = fab.stats(0), st1 = fab.stats(1);
  EXPECT_GT(st0.drops_loss + st1.drops_loss, 0u);
  EXPECT_GT(st0.duplicated + st1.duplicated, 0u);
  EXPECT_GT(st0.reordered + st1.reordered, 0u);
  NicCounters ca = a.dev->counters(), cb = b.dev->counters();
  EXPECT_GT(ca.retransmitted_packets, 0u);
  EXPECT_GT(cb.duplicate_request + cb.out_of_sequence, 0u);
  // Every forwarded packet was re-sealed and verified: nothing dropped for its ICRC or its source.
  EXPECT_EQ(st0.not_resealed + st1.not_resealed, 0u);
  EXPECT_GT(st0.resealed, 0u);
  EXPECT_GT(st1.resealed, 0u);
  for (const NicCounters* c : {&ca, &cb}) {
    EXPECT_EQ(c->rx_dropped_by_reason[static_cast<size_t>(RxDropReason::kBadIcrc)], 0u);
    EXPECT_EQ(c->rx_dropped_by_reason[static_cast<size_t>(RxDropReason::kWrongSource)], 0u);
  }
}

}  // namespace
}  // namespace rdmad::verbs::test
