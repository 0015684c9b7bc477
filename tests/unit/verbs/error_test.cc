// Failure semantics as ibverbs specifies them: remote access violations, local protection and length
// errors, RNR and transport retry exhaustion, flushes after the QP enters ERR, state-machine rules.
// Where rxe does otherwise than the IB spec or hardware, the rdma_core instance checks rxe's
// documented behaviour, keyed on is_rxe() (docs/verbs.md, "rxe findings").
#include <gtest/gtest.h>

#include <map>

#include "fake_peer.h"
#include "verbs_test_util.h"

namespace rdmad::verbs::test {
namespace {

class ErrorTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { SetUp(ConnectOptions{}); }
  void SetUp(const ConnectOptions& o) {
    std::string skip;
    auto da = open_device(GetParam(), soft_config(), &skip);
    if (!da) GTEST_SKIP() << skip;
    make_endpoint(a_, std::move(da));
    make_endpoint(b_, open_device(GetParam(), soft_config(), &skip));
    ASSERT_TRUE(b_.dev) << "the second device did not open: " << skip;
    connect_pair(a_, b_, o);
    local_.assign(8192, 0x11);
    remote_.assign(8192, 0x22);
    local_mr_ = std::move(a_.pd->reg_mr(local_.data(), local_.size(), kAccessLocalWrite).value());
    remote_mr_ = std::move(
        b_.pd->reg_mr(remote_.data(), remote_.size(), kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead)
            .value());
    // A NIC's counters count for the whole device since it came up: each test looks at what it adds.
    a_before_ = a_.dev->counters();
    b_before_ = b_.dev->counters();
    rxe_ = is_rxe(*a_.dev);
    if (rxe_) {
      for (const char* name : {"completer_retry_err", "retry_exceeded_err", "retry_rnr_exceeded_err"}) {
        rxe_before_[name] = driver_counter(*a_.dev, name);
      }
    }
  }
  void TearDown() override {
    local_mr_.reset();
    remote_mr_.reset();
  }
  SendWr write(uint64_t id, uint32_t len, uint64_t remote_off = 0) const {
    SendWr w;
    w.wr_id = id;
    w.opcode = WrOpcode::kRdmaWrite;
    w.sge = {reinterpret_cast<uint64_t>(local_.data()), len, local_mr_->lkey()};
    w.remote_addr = reinterpret_cast<uint64_t>(remote_.data()) + remote_off;
    w.rkey = remote_mr_->rkey();
    return w;
  }
  /// Posts one WR on a's QP and returns the status of its completion (kGeneralError if none came).
  WcStatus run_one(const SendWr& w) {
    if (!a_.qp->post_send({&w, 1}).ok()) return WcStatus::kGeneralError;
    auto wcs = wait_completions(*a_.scq, 1);
    return wcs.size() == 1 ? wcs[0].status : WcStatus::kGeneralError;
  }
  void expect_unchanged_remote() {
    for (uint8_t v : remote_) ASSERT_EQ(v, 0x22) << "target memory was modified";
  }
  void expect_state(QueuePair& qp, QpState s) { EXPECT_EQ(qp.query().state, s) << to_string(qp.query().state); }
  /// How much a NicCounters field of a's device grew since SetUp, once it reached `at_least`.
  uint64_t a_added(uint64_t NicCounters::*field, uint64_t at_least) {
    return counter_reaching([&] { return a_.dev->counters().*field - a_before_.*field; }, at_least);
  }
  uint64_t b_added(uint64_t NicCounters::*field, uint64_t at_least) {
    return counter_reaching([&] { return b_.dev->counters().*field - b_before_.*field; }, at_least);
  }
  /// The same for one of rxe's own hw_counters (read in SetUp).
  uint64_t rxe_added(const std::string& name, uint64_t at_least) {
    return counter_reaching([&] { return driver_counter(*a_.dev, name) - rxe_before_[name]; }, at_least);
  }

  Endpoint a_, b_;
  NicCounters a_before_, b_before_;
  bool rxe_ = false;
  std::map<std::string, uint64_t> rxe_before_;
  std::vector<uint8_t> local_, remote_;
  std::unique_ptr<MemoryRegion> local_mr_, remote_mr_;
};

TEST_P(ErrorTest, WrongRkeyFailsThenFlushes) {
  SendWr wrs[3] = {write(1, 100), write(2, 100), write(3, 100)};
  wrs[1].rkey ^= 0x100;  // a key no region has (soft: another table entry)
  std::fill(local_.begin(), local_.end(), 0x33);
  wrs[0].remote_addr += 4096;  // the good write lands in the upper half
  ASSERT_TRUE(a_.qp->post_send(wrs).ok());
  auto wcs = wait_completions(*a_.scq, 3);
  ASSERT_EQ(wcs.size(), 3u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[1].status, WcStatus::kRemoteAccessError) << to_string(wcs[1].status);
  EXPECT_EQ(wcs[2].status, WcStatus::kWrFlushed);
  EXPECT_EQ(wcs[2].wr_id, 3u);
  for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(remote_[i], 0x22);
  for (size_t i = 4096; i < 4196; ++i) ASSERT_EQ(remote_[i], 0x33);
  expect_state(*a_.qp, QpState::kError);
  expect_state(*b_.qp, QpState::kError);
  // rxe counts no access errors: rxe_hw_counters.c has no counter for them on either side.
  if (!rxe_) {
    EXPECT_GE(a_added(&NicCounters::req_remote_access_errors, 1), 1u);
    EXPECT_GE(b_added(&NicCounters::resp_remote_access_errors, 1), 1u);
  }
  // Posting in ERR is allowed and completes as flushed.
  SendWr late = write(9, 1);
  ASSERT_TRUE(a_.qp->post_send({&late, 1}).ok());
  auto more = wait_completions(*a_.scq, 1);
  ASSERT_EQ(more.size(), 1u);
  EXPECT_EQ(more[0].status, WcStatus::kWrFlushed);
}

TEST_P(ErrorTest, OutOfBoundsWriteLeavesTargetUntouched) {
  SendWr w = write(1, 200, remote_.size() - 100);
  EXPECT_EQ(run_one(w), WcStatus::kRemoteAccessError);
  expect_unchanged_remote();
}

TEST_P(ErrorTest, OutOfBoundsReadLeavesLocalUntouched) {
  SendWr w = write(1, 64, remote_.size() - 8);
  w.opcode = WrOpcode::kRdmaRead;
  EXPECT_EQ(run_one(w), WcStatus::kRemoteAccessError);
  for (uint8_t v : local_) ASSERT_EQ(v, 0x11);
}

TEST_P(ErrorTest, MissingRemoteWritePermission) {
  std::vector<uint8_t> ro(4096, 0x44);
  auto ro_mr = std::move(b_.pd->reg_mr(ro.data(), ro.size(), kAccessRemoteRead).value());
  SendWr w = write(1, 16);
  w.remote_addr = reinterpret_cast<uint64_t>(ro.data());
  w.rkey = ro_mr->rkey();
  EXPECT_EQ(run_one(w), WcStatus::kRemoteAccessError);
  for (uint8_t v : ro) ASSERT_EQ(v, 0x44);
}

TEST_P(ErrorTest, BadLkeyIsLocalProtectionError) {
  SendWr w = write(1, 16);
  w.sge.lkey ^= 0x300;
  // The IB spec's status for a gather list naming no valid region is Local Protection Error. rxe's
  // requester (rxe_req.c) fetches the payload with copy_data(), whose lookup of an unknown lkey
  // fails with -EINVAL, and finish_packet's caller turns only -EFAULT into IB_WC_LOC_PROT_ERR:
  // everything else completes as IB_WC_LOC_QP_OP_ERR.
  const WcStatus want = rxe_ ? WcStatus::kLocalQpOperationError : WcStatus::kLocalProtectionError;
  EXPECT_EQ(run_one(w), want) << "want " << to_string(want);
  expect_unchanged_remote();
  expect_state(*a_.qp, QpState::kError);
}

TEST_P(ErrorTest, SendLongerThanReceiveBuffer) {
  RecvWr r;
  r.wr_id = 5;
  r.sge = {reinterpret_cast<uint64_t>(remote_.data()), 10, remote_mr_->lkey()};
  ASSERT_TRUE(b_.qp->post_recv({&r, 1}).ok());
  SendWr w = write(1, 11);
  w.opcode = WrOpcode::kSend;
  // IB spec: a SEND longer than the receive buffer is an Invalid Request (NAK to the requester,
  // Local Length Error on the receive). rxe (6.1) means to do that (rxe_resp.c send_data_in:
  // -ENOSPC → RESPST_ERR_LENGTH), but copy_data() reports the short buffer as -EINVAL, which
  // takes the malformed-WQE path instead: a Remote Operational Error NAK and a receive completing
  // with IB_WC_LOC_QP_OP_ERR. Nothing is written either way.
  const WcStatus want_send = rxe_ ? WcStatus::kRemoteOperationalError : WcStatus::kRemoteInvalidRequest;
  const WcStatus want_recv = rxe_ ? WcStatus::kLocalQpOperationError : WcStatus::kLocalLengthError;
  EXPECT_EQ(run_one(w), want_send) << "want " << to_string(want_send);
  auto rwcs = wait_completions(*b_.rcq, 1);
  ASSERT_EQ(rwcs.size(), 1u);
  EXPECT_EQ(rwcs[0].status, want_recv) << to_string(rwcs[0].status) << ", want " << to_string(want_recv);
  expect_unchanged_remote();
}

TEST_P(ErrorTest, RnrRetryExceeded) {
  ConnectOptions o;
  o.rnr_retry = 2;
  TearDown();
  a_.reset();
  b_.reset();
  SetUp(o);
  SendWr w = write(1, 16);
  w.opcode = WrOpcode::kSend;
  EXPECT_EQ(run_one(w), WcStatus::kRnrRetryExceeded);
  EXPECT_EQ(a_added(&NicCounters::rnr_nak_retry_err, 3), 3u);  // RNR NAKs: the first try and two retries
  if (rxe_) {
    EXPECT_EQ(rxe_added("retry_rnr_exceeded_err", 1), 1u);
  }
}

TEST_P(ErrorTest, RnrThenReceivePostedSucceeds) {
  SendWr w = write(1, 16);
  w.opcode = WrOpcode::kSend;
  ASSERT_TRUE(a_.qp->post_send({&w, 1}).ok());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (a_.dev->counters().rnr_nak_retry_err == a_before_.rnr_nak_retry_err &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_GT(a_.dev->counters().rnr_nak_retry_err, a_before_.rnr_nak_retry_err) << "no RNR NAK within 10 s";
  RecvWr r;
  r.wr_id = 5;
  r.sge = {reinterpret_cast<uint64_t>(remote_.data()), 16, remote_mr_->lkey()};
  ASSERT_TRUE(b_.qp->post_recv({&r, 1}).ok());
  auto wcs = wait_completions(*a_.scq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  auto rwcs = wait_completions(*b_.rcq, 1);
  ASSERT_EQ(rwcs.size(), 1u);
  EXPECT_EQ(rwcs[0].byte_len, 16u);
  for (size_t i = 0; i < 16; ++i) ASSERT_EQ(remote_[i], 0x11);
}

TEST_P(ErrorTest, PeerGoneRetryExceededThenFlushed) {
  ConnectOptions o;
  o.timeout = 8;  // 1 ms
  o.retry_cnt = 2;
  TearDown();
  a_.reset();
  b_.reset();
  SetUp(o);
  SendWr wrs[2] = {write(1, 16), write(2, 16)};
  remote_mr_.reset();
  b_.reset();  // the peer disappears: nothing answers
  ASSERT_TRUE(a_.qp->post_send(wrs).ok());
  auto wcs = wait_completions(*a_.scq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRetryExceeded) << to_string(wcs[0].status);
  EXPECT_EQ(wcs[1].status, WcStatus::kWrFlushed);
  if (rxe_) {
    // rxe has no counter of ACK timeouts alone (local_ack_timeout_err stays 0): rxe_comp.c counts
    // each retry it starts in completer_retry_err (after a timeout or a sequence NAK; here only
    // timeouts) and the timeout that finds retry_cnt spent in retry_exceeded_err.
    EXPECT_EQ(rxe_added("completer_retry_err", 2), 2u);
    EXPECT_EQ(rxe_added("retry_exceeded_err", 1), 1u);
  } else {
    EXPECT_EQ(a_added(&NicCounters::local_ack_timeout_err, 3), 3u);  // two retries, then the third timeout fails
  }
  expect_state(*a_.qp, QpState::kError);
}

// A soft NIC's QP connected to a FakePeer that never answers: what it sends can be read off the
// wire, and nothing it sends is ever acknowledged.
struct QpToSilentPeer {
  Endpoint a;
  FakePeer peer;
  std::vector<uint8_t> buf;
  std::unique_ptr<MemoryRegion> mr;

  void open(const ConnectOptions& o, size_t bytes) {
    ASSERT_NO_FATAL_FAILURE(open_connected(a, peer, o));
    buf.assign(bytes, 0x5a);
    mr = std::move(a.pd->reg_mr(buf.data(), buf.size(), kAccessLocalWrite).value());
  }
  /// Posts one WRITE of the whole buffer.
  void post_write() {
    SendWr w;
    w.opcode = WrOpcode::kRdmaWrite;
    w.sge = {reinterpret_cast<uint64_t>(buf.data()), static_cast<uint32_t>(buf.size()), mr->lkey()};
    w.remote_addr = 0x1000;
    w.rkey = 0x77;
    ASSERT_TRUE(a.qp->post_send({&w, 1}).ok());
  }
  /// The next packet on the wire, decoded (ICRC verified); false after 2 s.
  bool next(roce::Packet* pkt) {
    sockaddr_in from{};
    uint8_t b[4200];
    return peer.receive(pkt, &from, b, sizeof b, std::chrono::steady_clock::now() + std::chrono::seconds(2));
  }
};

// A lost packet with nothing else in flight: the requester resends one timeout after its last
// progress. The peer never answers; the resend must come at the timeout (4.096 µs · 2^14 = 67 ms),
// not a timeout later (the pass that notices the timeout runs after the transmit step, and
// sleeping until the next deadline there would hold the resend back until then).
TEST(RetransmitTimer, ResendLeavesAtTheTimeoutNotTwiceIt) {
  QpToSilentPeer q;
  ConnectOptions o;
  o.timeout = 14;
  o.retry_cnt = 1;
  ASSERT_NO_FATAL_FAILURE(q.open(o, 64));
  ASSERT_NO_FATAL_FAILURE(q.post_write());
  roce::Packet pkt;
  ASSERT_TRUE(q.next(&pkt)) << "the first transmission never arrived";
  const auto first = std::chrono::steady_clock::now();
  ASSERT_TRUE(q.next(&pkt)) << "no resend within 2 s";
  EXPECT_EQ(pkt.bth.psn, o.sq_psn) << "the resend is the same packet";
  const double gap_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - first).count();
  const double timeout_ms = 4.096e-3 * (1 << 14);
  EXPECT_GE(gap_ms, 0.9 * timeout_ms) << "resent before the timeout";
  EXPECT_LT(gap_ms, 1.5 * timeout_ms) << "resent " << gap_ms << " ms after the first transmission";
}

// ACK requests: the last packet of a message asks; the packets before it do not when nothing has
// been waiting for an ACK (the time-based request is for packets left unacknowledged for an eighth
// of the timeout).
TEST(AckRequests, OnlyTheLastPacketOfAMessageOnAnIdleQpAsks) {
  QpToSilentPeer q;
  ConnectOptions o;
  o.mtu = 1024;
  ASSERT_NO_FATAL_FAILURE(q.open(o, 3000));
  ASSERT_NO_FATAL_FAILURE(q.post_write());
  for (int i = 0; i < 3; ++i) {
    roce::Packet pkt;
    ASSERT_TRUE(q.next(&pkt)) << "packet " << i << " never arrived";
    EXPECT_EQ(pkt.bth.ack_req, i == 2) << "packet " << i << " (opcode " << int{static_cast<uint8_t>(pkt.bth.opcode)} << ")";
  }
}

TEST_P(ErrorTest, UnsignaledSuccessesAreSilentErrorsAreNot) {
  SendWr wrs[3] = {write(1, 8), write(2, 8), write(3, 8)};
  wrs[0].signaled = wrs[1].signaled = false;
  ASSERT_TRUE(a_.qp->post_send(wrs).ok());
  auto wcs = wait_completions(*a_.scq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 3u);
  WorkCompletion extra[4];
  EXPECT_EQ(a_.scq->poll(extra), 0u);
}

INSTANTIATE_TEST_SUITE_P(Verbs, ErrorTest, ::testing::Values("soft", "rdma_core", "dpdk", "dpdk_af_packet"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace rdmad::verbs::test
