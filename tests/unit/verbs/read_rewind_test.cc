// A rewind into a READ whose responses then all arrive re-requests nothing: the next WR's packets
// keep their PSNs. Before, a sequence NAK for a READ's first PSN followed (in the same receive
// batch) by all its responses made the requester send a zero-length READ request at the next WR's
// first PSN; the responder took it in sequence, the next WRITE's first packet became a duplicate
// and its second a "middle without a first" (remote invalid request). The security tests' forged
// far-ahead WRITE triggered exactly that (the responder's sequence NAK for it), 1 run in 3.
#include <gtest/gtest.h>

#include "fake_peer.h"
#include "verbs_test_util.h"

namespace rdmad::verbs::test {
namespace {

TEST(ReadRewind, AllResponsesAfterARewindReRequestNothing) {
  Endpoint a;
  FakePeer peer;
  ConnectOptions o;
  o.timeout = 16;  // no timeout resend while the test looks at the wire
  ASSERT_NO_FATAL_FAILURE(open_connected(a, peer, o));
  std::vector<uint8_t> buf(2048, 0);
  auto mr = std::move(a.pd->reg_mr(buf.data(), buf.size(), kAccessLocalWrite).value());
  const uint16_t nic = a.dev->query_port(1).value().udp_port;
  uint8_t b[4200];
  sockaddr_in from{};
  auto next = [&](roce::Packet* p) {
    return peer.receive(p, &from, b, sizeof b, std::chrono::steady_clock::now() + std::chrono::seconds(2));
  };

  SendWr rd;
  rd.opcode = WrOpcode::kRdmaRead;
  rd.sge = {reinterpret_cast<uint64_t>(buf.data()), 2048, mr->lkey()};
  rd.remote_addr = 0x1000;
  rd.rkey = 0x77;
  ASSERT_TRUE(a.qp->post_send({&rd, 1}).is_ok());
  roce::Packet req;
  ASSERT_TRUE(next(&req));
  ASSERT_EQ(req.bth.opcode, roce::Opcode::kReadRequest);
  const uint32_t p0 = req.bth.psn;

  // The sequence NAK first, then both responses, together.
  std::vector<uint8_t> data(1024, 0x3C);
  roce::Packet nak, first, last;
  nak.bth.opcode = roce::Opcode::kAcknowledge;
  nak.bth.dest_qp = a.qp->qp_num();
  nak.bth.psn = p0;
  nak.aeth = roce::Aeth::nak(0, roce::NakCode::kPsnSequenceError);
  first.bth.opcode = roce::Opcode::kReadResponseFirst;
  first.bth.dest_qp = a.qp->qp_num();
  first.bth.psn = p0;
  first.aeth = roce::Aeth::ack(0);
  first.payload = data;
  last = first;
  last.bth.opcode = roce::Opcode::kReadResponseLast;
  last.bth.psn = roce::psn_add(p0, 1);
  ASSERT_TRUE(peer.send_burst({nak, first, last}, nic));
  auto wc = wait_completions(*a.scq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);

  // Then a WRITE: the next packet on the wire must be it, at the PSN after the READ's. A re-request
  // of the READ (if the NAK was taken before the responses) may come first.
  SendWr w;
  w.opcode = WrOpcode::kRdmaWrite;
  w.sge = {reinterpret_cast<uint64_t>(buf.data()), 64, mr->lkey()};
  w.remote_addr = 0x1000;
  w.rkey = 0x77;
  ASSERT_TRUE(a.qp->post_send({&w, 1}).is_ok());
  roce::Packet p;
  do {
    ASSERT_TRUE(next(&p)) << "the WRITE never left";
    if (p.bth.opcode == roce::Opcode::kReadRequest) {
      EXPECT_EQ(p.bth.psn, p0) << "a READ request at a PSN that is not the READ's";
      EXPECT_NE(p.reth.dma_length, 0u) << "a zero-length READ request";
    }
  } while (p.bth.opcode == roce::Opcode::kReadRequest);
  EXPECT_EQ(p.bth.opcode, roce::Opcode::kWriteOnly);
  EXPECT_EQ(p.bth.psn, roce::psn_add(p0, 2));
}

}  // namespace
}  // namespace rdmad::verbs::test
