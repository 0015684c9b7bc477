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

// A soft QP connected to a FakePeer that plays the responder, and a registered buffer.
struct Rig {
  Endpoint a;
  FakePeer peer;
  std::vector<uint8_t> buf;
  std::unique_ptr<MemoryRegion> mr;
  uint16_t nic = 0;
  uint8_t b[4200];
  sockaddr_in from{};

  void open(const ConnectOptions& o, size_t bytes) {
    ASSERT_NO_FATAL_FAILURE(open_connected(a, peer, o));
    buf.assign(bytes, 0);
    mr = std::move(a.pd->reg_mr(buf.data(), buf.size(), kAccessLocalWrite).value());
    nic = a.dev->query_port(1).value().udp_port;
  }
  // The next packet the QP sends, within 2 s.
  bool next(roce::Packet* p) {
    return peer.receive(p, &from, b, sizeof b, std::chrono::steady_clock::now() + std::chrono::seconds(2));
  }
};

TEST(ReadRewind, AllResponsesAfterARewindReRequestNothing) {
  Rig r;
  ConnectOptions o;
  o.timeout = 16;  // no timeout resend while the test looks at the wire
  ASSERT_NO_FATAL_FAILURE(r.open(o, 2048));
  Endpoint& a = r.a;
  FakePeer& peer = r.peer;
  auto& buf = r.buf;
  auto& mr = r.mr;
  const uint16_t nic = r.nic;
  auto next = [&](roce::Packet* p) { return r.next(p); };

  SendWr rd;
  rd.opcode = WrOpcode::kRdmaRead;
  rd.sge = {reinterpret_cast<uint64_t>(buf.data()), 2048, mr->lkey()};
  rd.remote_addr = 0x1000;
  rd.rkey = 0x77;
  ASSERT_TRUE(a.qp->post_send({&rd, 1}).ok());
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
  ASSERT_TRUE(a.qp->post_send({&w, 1}).ok());
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

// A later READ answered in full while an earlier one waits for its re-request: once the earlier
// READ's missing response arrives, both complete. rxe answers that way (it goes on serving the
// READs queued after a duplicate READ request); before, una stopped at the later READ, whose
// responses had all arrived, so nothing acknowledged it: the timer fired, found nothing to
// re-request, and after retry_cnt timeouts the READ failed with retry exceeded
// (tests/vm/guest/interop_rxe.sh, lossy phase, 6 READs in flight).
TEST(ReadRewind, ALaterReadAnsweredFirstCompletesWithTheEarlierOne) {
  Rig r;
  ConnectOptions o;
  o.timeout = 16;  // 268 ms: one timeout would already fail the deadline below
  o.retry_cnt = 1;
  ASSERT_NO_FATAL_FAILURE(r.open(o, 4096));
  Endpoint& a = r.a;
  auto& buf = r.buf;
  auto& mr = r.mr;
  auto next = [&](roce::Packet* p) { return r.next(p); };
  SendWr rd[2];
  for (int i = 0; i < 2; ++i) {
    rd[i].wr_id = static_cast<uint64_t>(i);
    rd[i].opcode = WrOpcode::kRdmaRead;
    rd[i].remote_addr = 0x1000;
    rd[i].rkey = 0x77;
  }
  rd[0].sge = {reinterpret_cast<uint64_t>(buf.data()), 2048, mr->lkey()};         // two responses
  rd[1].sge = {reinterpret_cast<uint64_t>(buf.data() + 2048), 1024, mr->lkey()};  // one
  ASSERT_TRUE(a.qp->post_send(rd).ok());
  roce::Packet req;
  ASSERT_TRUE(next(&req));
  const uint32_t p0 = req.bth.psn;
  ASSERT_TRUE(next(&req));
  ASSERT_EQ(req.bth.psn, roce::psn_add(p0, 2));

  std::vector<uint8_t> data(1024, 0x5A);
  auto response = [&](roce::Opcode op, uint32_t psn) {
    roce::Packet p;
    p.bth.opcode = op;
    p.bth.dest_qp = a.qp->qp_num();
    p.bth.psn = psn;
    p.aeth = roce::Aeth::ack(0);
    p.payload = data;
    return p;
  };
  // The first READ's second response is lost; the second READ is answered in full.
  ASSERT_TRUE(r.peer.send_burst({response(roce::Opcode::kReadResponseFirst, p0),
                                 response(roce::Opcode::kReadResponseOnly, roce::psn_add(p0, 2))},
                                r.nic));
  // The gap makes the requester re-request the first READ from its missing PSN.
  do {
    ASSERT_TRUE(next(&req)) << "no re-request";
  } while (req.bth.opcode != roce::Opcode::kReadRequest || req.bth.psn != roce::psn_add(p0, 1));
  EXPECT_EQ(req.reth.dma_length, 1024u);
  // As rxe answers a re-request from the middle of a READ: Read Response Last.
  ASSERT_TRUE(r.peer.send(response(roce::Opcode::kReadResponseLast, roce::psn_add(p0, 1)), r.nic));
  auto wc = wait_completions(*a.scq, 2, std::chrono::milliseconds(200));
  ASSERT_EQ(wc.size(), 2u) << "the second READ waited for a timeout";
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wc[1].status, WcStatus::kSuccess);
  EXPECT_EQ(a.dev->counters().local_ack_timeout_err, 0u);
  for (size_t i = 0; i < 3072; ++i) ASSERT_EQ(buf[i], 0x5A) << i;
}

}  // namespace
}  // namespace rdmad::verbs::test
