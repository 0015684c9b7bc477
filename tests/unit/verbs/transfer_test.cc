// Two devices of one backend in one process: every operation, message sizes around the MTU
// boundaries, every path MTU, byte-exact with guard bytes after the target; completion notification.
#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <thread>

#include "verbs_test_util.h"

namespace rdmad::verbs::test {
namespace {

struct TransferCase {
  std::string backend;
  WrOpcode op;
  uint32_t size;
  uint32_t mtu;
};

std::string op_name(WrOpcode op) {
  switch (op) {
    case WrOpcode::kSend: return "Send";
    case WrOpcode::kSendWithImm: return "SendImm";
    case WrOpcode::kRdmaWrite: return "Write";
    case WrOpcode::kRdmaWriteWithImm: return "WriteImm";
    case WrOpcode::kRdmaRead: return "Read";
  }
  return "?";
}

void PrintTo(const TransferCase& c, std::ostream* os) {
  *os << c.backend << " " << op_name(c.op) << " " << c.size << " B mtu " << c.mtu;
}

class TransferTest : public ::testing::TestWithParam<TransferCase> {};

constexpr size_t kGuard = 64;

TEST_P(TransferTest, ByteExact) {
  const TransferCase& c = GetParam();
  std::string skip;
  Endpoint a, b;
  auto da = open_device(c.backend, soft_config(), &skip);
  if (!da) GTEST_SKIP() << skip;
  make_endpoint(a, std::move(da));
  make_endpoint(b, open_device(c.backend, soft_config(), &skip));
  ASSERT_TRUE(b.dev) << "the second device did not open: " << skip;
  ConnectOptions o;
  o.mtu = c.mtu;
  connect_pair(a, b, o);

  // a is the requester; for READ data flows b → a, otherwise a → b.
  const bool read = c.op == WrOpcode::kRdmaRead;
  std::vector<uint8_t> src(c.size), dst(c.size + kGuard, 0xEE);
  fill_pattern(src, c.size ^ c.mtu);
  Endpoint& src_ep = read ? b : a;
  Endpoint& dst_ep = read ? a : b;
  auto src_mr = src_ep.pd->reg_mr(src.data(), src.size(), kAccessLocalWrite | kAccessRemoteRead);
  auto dst_mr = dst_ep.pd->reg_mr(dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite);
  ASSERT_TRUE(src_mr.ok() && dst_mr.ok());

  const bool two_sided = c.op == WrOpcode::kSend || c.op == WrOpcode::kSendWithImm ||
                         c.op == WrOpcode::kRdmaWriteWithImm;
  if (two_sided) {
    RecvWr r;
    r.wr_id = 77;
    if (c.op != WrOpcode::kRdmaWriteWithImm) r.sge = {reinterpret_cast<uint64_t>(dst.data()), c.size, dst_mr->get()->lkey()};
    ASSERT_TRUE(b.qp->post_recv({&r, 1}).ok());
  }
  SendWr w;
  w.wr_id = 42;
  w.opcode = c.op;
  w.imm_data = 0xC0FFEE;
  if (read) {
    w.sge = {reinterpret_cast<uint64_t>(dst.data()), c.size, dst_mr->get()->lkey()};
    w.remote_addr = reinterpret_cast<uint64_t>(src.data());
    w.rkey = src_mr->get()->rkey();
  } else {
    w.sge = {reinterpret_cast<uint64_t>(src.data()), c.size, src_mr->get()->lkey()};
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
    w.rkey = dst_mr->get()->rkey();
  }
  ASSERT_TRUE(a.qp->post_send({&w, 1}).ok());
  auto wcs = wait_completions(*a.scq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 42u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess) << to_string(wcs[0].status);
  if (two_sided) {
    auto rwcs = wait_completions(*b.rcq, 1);
    ASSERT_EQ(rwcs.size(), 1u);
    EXPECT_EQ(rwcs[0].wr_id, 77u);
    EXPECT_EQ(rwcs[0].status, WcStatus::kSuccess);
    EXPECT_EQ(rwcs[0].byte_len, c.size);
    EXPECT_EQ(rwcs[0].has_imm, c.op != WrOpcode::kSend);
    if (rwcs[0].has_imm) {
      EXPECT_EQ(rwcs[0].imm_data, 0xC0FFEEu);
    }
    EXPECT_EQ(rwcs[0].opcode, c.op == WrOpcode::kRdmaWriteWithImm ? WcOpcode::kRecvRdmaWithImm : WcOpcode::kRecv);
  }
  ASSERT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << "payload differs";
  for (size_t i = c.size; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE) << "write past the end at " << i;
}

std::vector<TransferCase> cases() {
  std::vector<TransferCase> out;
  const WrOpcode ops[] = {WrOpcode::kSend, WrOpcode::kSendWithImm, WrOpcode::kRdmaWrite,
                          WrOpcode::kRdmaWriteWithImm, WrOpcode::kRdmaRead};
  for (const char* backend : {"soft", "rdma_core"}) {
    for (uint32_t mtu : {256u, 512u, 1024u, 2048u, 4096u}) {
      for (WrOpcode op : ops) {
        for (uint32_t size : {1u, mtu - 1, mtu, mtu + 1, 3 * mtu + 7, 200'000u}) out.push_back({backend, op, size, mtu});
      }
    }
    for (WrOpcode op : {WrOpcode::kRdmaWrite, WrOpcode::kRdmaRead, WrOpcode::kSendWithImm}) {
      out.push_back({backend, op, 64u << 20, 4096});
    }
    out.push_back({backend, WrOpcode::kRdmaWrite, 1u << 20, 256});
  }
  // The dpdk instances (net_memif, net_af_packet): every op at two MTUs, and large messages.
  for (const char* backend : {"dpdk", "dpdk_af_packet"}) {
    for (uint32_t mtu : {1024u, 4096u}) {
      for (WrOpcode op : ops) {
        for (uint32_t size : {1u, 3 * mtu + 7}) out.push_back({backend, op, size, mtu});
      }
    }
    for (WrOpcode op : {WrOpcode::kRdmaWrite, WrOpcode::kRdmaRead, WrOpcode::kSendWithImm}) {
      out.push_back({backend, op, 1u << 20, 4096});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Verbs, TransferTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<TransferCase>& i) {
                           return i.param.backend + "_" + op_name(i.param.op) + "_" + std::to_string(i.param.size) +
                                  "B_mtu" + std::to_string(i.param.mtu);
                         });

}  // namespace
}  // namespace rdmad::verbs::test

namespace rdmad::verbs::test {
namespace {

// RoCEv2 over IPv6 (the ICRC masks the traffic class and flow label the kernel sets; the dpdk
// port resolves its peer by neighbour discovery and computes the UDP checksum itself).
class TransferV6 : public ::testing::TestWithParam<std::string> {};

TEST_P(TransferV6, WriteThenReadBackOverIpv6) {
  std::string skip;
  auto da = open_device(GetParam(), soft_config("::1"), &skip);
  if (!da) GTEST_SKIP() << "no IPv6 here: " << skip;
  Endpoint a, b;
  make_endpoint(a, std::move(da));
  make_endpoint(b, open_device(GetParam(), soft_config("::1"), &skip));
  ASSERT_TRUE(b.dev) << skip;
  EXPECT_TRUE(a.dev->query_port(1).value().gid.to_ip_string().find(':') != std::string::npos);
  connect_pair(a, b);
  std::vector<uint8_t> src(100'000), remote(100'000, 0), back(100'000, 0);
  fill_pattern(src, 6);
  auto smr = std::move(a.pd->reg_mr(src.data(), src.size(), 0).value());
  auto bmr = std::move(a.pd->reg_mr(back.data(), back.size(), kAccessLocalWrite).value());
  auto rmr = std::move(
      b.pd->reg_mr(remote.data(), remote.size(), kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead).value());
  SendWr w[2];
  w[0].opcode = WrOpcode::kRdmaWrite;
  w[0].sge = {reinterpret_cast<uint64_t>(src.data()), 100'000, smr->lkey()};
  w[0].remote_addr = reinterpret_cast<uint64_t>(remote.data());
  w[0].rkey = rmr->rkey();
  w[1] = w[0];
  w[1].opcode = WrOpcode::kRdmaRead;
  w[1].sge = {reinterpret_cast<uint64_t>(back.data()), 100'000, bmr->lkey()};
  ASSERT_TRUE(a.qp->post_send(w).ok());
  auto wcs = wait_completions(*a.scq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[1].status, WcStatus::kSuccess);
  EXPECT_TRUE(src == remote);
  EXPECT_TRUE(src == back);
  EXPECT_EQ(b.dev->counters().rx_dropped, 0u) << "ICRC or decode failures over IPv6";
}

INSTANTIATE_TEST_SUITE_P(Verbs, TransferV6, ::testing::Values("soft", "dpdk", "dpdk_af_packet"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// completion_spin_us: the requester's datapath polls after each completion instead of sleeping, and
// must still notice every post (no lost doorbell) and place every byte.
TEST(TransferSpin, PingPongWithCompletionSpin) {
  std::string skip;
  DeviceConfig c = soft_config();
  c.backend_options["completion_spin_us"] = 50;
  Endpoint a, b;
  make_endpoint(a, open_device("soft", c, &skip));
  make_endpoint(b, open_device("soft", c, &skip));
  connect_pair(a, b);
  std::vector<uint8_t> src(64), remote(64 * 300, 0);
  auto smr = std::move(a.pd->reg_mr(src.data(), src.size(), 0).value());
  auto rmr = std::move(b.pd->reg_mr(remote.data(), remote.size(), kAccessLocalWrite | kAccessRemoteWrite).value());
  std::vector<uint8_t> expect(remote.size(), 0);
  for (size_t i = 0; i < 300; ++i) {
    fill_pattern(src, static_cast<uint32_t>(i));
    std::copy(src.begin(), src.end(), expect.begin() + static_cast<std::ptrdiff_t>(i * 64));
    SendWr w;
    w.opcode = WrOpcode::kRdmaWrite;
    w.sge = {reinterpret_cast<uint64_t>(src.data()), 64, smr->lkey()};
    w.remote_addr = reinterpret_cast<uint64_t>(remote.data() + i * 64);
    w.rkey = rmr->rkey();
    ASSERT_TRUE(a.qp->post_send({&w, 1}).ok());
    auto wcs = wait_completions(*a.scq, 1, std::chrono::milliseconds(5000));
    ASSERT_EQ(wcs.size(), 1u) << "round trip " << i;
    ASSERT_EQ(wcs[0].status, WcStatus::kSuccess);
  }
  EXPECT_TRUE(remote == expect);
}

// Completion notification: a consumer that arms its CQ, looks once more and then sleeps on
// notify_fd() is woken for every completion, on the send CQ (the requester's ACK path) and on the
// receive CQ (the responder's), and an unarmed CQ raises no event.
std::vector<WorkCompletion> wait_notified(CompletionQueue& cq, size_t n) {
  std::vector<WorkCompletion> out;
  WorkCompletion wc[16];
  auto take = [&] {
    size_t k = cq.poll(wc);
    out.insert(out.end(), wc, wc + k);
    return k;
  };
  while (out.size() < n) {
    if (take() > 0) continue;
    EXPECT_TRUE(cq.request_notify().ok());
    if (take() > 0) continue;
    pollfd p{cq.notify_fd(), POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) {
      ADD_FAILURE() << "no notification within 5 s after " << out.size() << " completions";
      break;
    }
    cq.ack_notify();
  }
  return out;
}

TEST(TransferNotify, SleepingConsumerWakesForEveryCompletion) {
  std::string skip;
  Endpoint a, b;
  make_endpoint(a, open_device("soft", soft_config(), &skip));
  make_endpoint(b, open_device("soft", soft_config(), &skip));
  connect_pair(a, b);
  ASSERT_GE(a.scq->notify_fd(), 0);
  ASSERT_GE(b.rcq->notify_fd(), 0);
  constexpr size_t kMessages = 200;
  std::vector<uint8_t> src(3000), dst(3000 * kMessages, 0), expect(dst.size());
  auto smr = std::move(a.pd->reg_mr(src.data(), src.size(), 0).value());
  auto dmr = std::move(b.pd->reg_mr(dst.data(), dst.size(), kAccessLocalWrite).value());
  for (size_t i = 0; i < kMessages; ++i) {
    RecvWr r;
    r.wr_id = i;
    r.sge = {reinterpret_cast<uint64_t>(dst.data() + i * src.size()), static_cast<uint32_t>(src.size()),
             dmr->lkey()};
    ASSERT_TRUE(b.qp->post_recv({&r, 1}).ok());
  }
  std::jthread receiver([&] {  // joins on every exit, also a failed ASSERT below
    auto got = wait_notified(*b.rcq, kMessages);
    ASSERT_EQ(got.size(), kMessages);
    for (size_t i = 0; i < kMessages; ++i) {
      EXPECT_EQ(got[i].status, WcStatus::kSuccess);
      EXPECT_EQ(got[i].wr_id, i);
    }
  });
  for (size_t i = 0; i < kMessages; ++i) {
    fill_pattern(src, static_cast<uint32_t>(i + 7));
    std::copy(src.begin(), src.end(), expect.begin() + static_cast<std::ptrdiff_t>(i * src.size()));
    SendWr w;
    w.wr_id = i;
    w.opcode = WrOpcode::kSend;
    w.sge = {reinterpret_cast<uint64_t>(src.data()), static_cast<uint32_t>(src.size()), smr->lkey()};
    ASSERT_TRUE(a.qp->post_send({&w, 1}).ok());
    auto wcs = wait_notified(*a.scq, 1);  // the source buffer is reused: one message at a time
    ASSERT_EQ(wcs.size(), 1u) << "message " << i;
    ASSERT_EQ(wcs[0].status, WcStatus::kSuccess);
  }
  receiver.join();
  EXPECT_TRUE(dst == expect);

  // Not armed: a completion leaves the fd quiet.
  SendWr w;
  w.opcode = WrOpcode::kRdmaWrite;
  w.sge = {reinterpret_cast<uint64_t>(src.data()), 64, smr->lkey()};
  auto rmr = std::move(b.pd->reg_mr(dst.data(), 64, kAccessLocalWrite | kAccessRemoteWrite).value());
  w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
  w.rkey = rmr->rkey();
  ASSERT_TRUE(a.qp->post_send({&w, 1}).ok());
  ASSERT_EQ(wait_completions(*a.scq, 1).size(), 1u);
  pollfd p{a.scq->notify_fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0);
}

}  // namespace
}  // namespace rdmad::verbs::test
