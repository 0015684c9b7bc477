// Two soft devices in two processes: RDMA WRITE into the peer, READ back, and SEND/RECV with
// immediates echoed by the peer, byte-exact, over several MTUs.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "unit/verbs/verbs_test_util.h"

namespace rdmad::verbs::test {
namespace {

struct Peer {
  pid_t pid = -1;
  FILE* out = nullptr;  // peer's stdout
  int in = -1;          // peer's stdin
  ~Peer() {
    if (in >= 0) close(in);
    if (out) fclose(out);
    if (pid > 0) {
      int st;
      waitpid(pid, &st, 0);
    }
  }
};

bool start_peer(Peer& p) {
  int to_child[2], from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) return false;
  p.pid = fork();
  if (p.pid == 0) {
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    close(to_child[1]);
    close(from_child[0]);
    execl(RDMAD_BINARY_DIR "/tests/integration/verbs/verbs_test_peer", "verbs_test_peer", nullptr);
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  p.in = to_child[1];
  p.out = fdopen(from_child[0], "r");
  return p.pid > 0;
}

class TwoProcessTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(TwoProcessTest, WriteReadSendAcrossProcesses) {
  const uint32_t mtu = GetParam();
  Peer peer;
  ASSERT_TRUE(start_peer(peer));
  unsigned port = 0, qpn = 0, rkey = 0;
  unsigned long long addr = 0;
  size_t len = 0;
  ASSERT_EQ(fscanf(peer.out, "port %u qpn %u addr %llu rkey %u len %zu", &port, &qpn, &addr, &rkey, &len), 5);

  Endpoint e;
  std::string skip;
  make_endpoint(e, open_device("soft", soft_config(), &skip));
  PortInfo mine = e.dev->query_port(1).value();
  std::string line = std::to_string(mine.udp_port) + " " + std::to_string(e.qp->qp_num()) + " " +
                     std::to_string(mtu) + "\n";
  ASSERT_EQ(write(peer.in, line.data(), line.size()), static_cast<ssize_t>(line.size()));
  char ready[16] = {};
  ASSERT_EQ(fscanf(peer.out, "%15s", ready), 1);
  ASSERT_STREQ(ready, "ready");
  PortInfo theirs = mine;
  theirs.udp_port = static_cast<uint16_t>(port);
  ConnectOptions o;
  o.mtu = mtu;
  ASSERT_TRUE(connect_qp(*e.qp, theirs, qpn, 1000, 2000, o).ok());

  const size_t n = len;
  std::vector<uint8_t> src(n), back(n, 0), msg(100'000), reply(100'000, 0);
  fill_pattern(src, mtu);
  fill_pattern(msg, mtu + 1);
  auto smr = std::move(e.pd->reg_mr(src.data(), n, 0).value());
  auto bmr = std::move(e.pd->reg_mr(back.data(), n, kAccessLocalWrite).value());
  auto mmr = std::move(e.pd->reg_mr(msg.data(), msg.size(), 0).value());
  auto rmr = std::move(e.pd->reg_mr(reply.data(), reply.size(), kAccessLocalWrite).value());

  RecvWr r;
  r.wr_id = 9;
  r.sge = {reinterpret_cast<uint64_t>(reply.data()), static_cast<uint32_t>(reply.size()), rmr->lkey()};
  ASSERT_TRUE(e.qp->post_recv({&r, 1}).ok());
  SendWr wrs[3];
  wrs[0].wr_id = 1;
  wrs[0].opcode = WrOpcode::kRdmaWrite;
  wrs[0].sge = {reinterpret_cast<uint64_t>(src.data()), static_cast<uint32_t>(n), smr->lkey()};
  wrs[0].remote_addr = addr;
  wrs[0].rkey = rkey;
  wrs[1] = wrs[0];
  wrs[1].wr_id = 2;
  wrs[1].opcode = WrOpcode::kRdmaRead;  // ordered after the WRITE on the same QP
  wrs[1].sge = {reinterpret_cast<uint64_t>(back.data()), static_cast<uint32_t>(n), bmr->lkey()};
  wrs[2].wr_id = 3;
  wrs[2].opcode = WrOpcode::kSendWithImm;
  wrs[2].imm_data = 41;
  wrs[2].sge = {reinterpret_cast<uint64_t>(msg.data()), static_cast<uint32_t>(msg.size()), mmr->lkey()};
  ASSERT_TRUE(e.qp->post_send(wrs).ok());
  auto wcs = wait_completions(*e.scq, 3);
  ASSERT_EQ(wcs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(wcs[i].wr_id, i + 1);
    EXPECT_EQ(wcs[i].status, WcStatus::kSuccess) << to_string(wcs[i].status);
  }
  EXPECT_TRUE(src == back) << "READ after WRITE did not return the written bytes";
  auto rw = wait_completions(*e.rcq, 1);
  ASSERT_EQ(rw.size(), 1u);
  EXPECT_EQ(rw[0].imm_data, 42u);
  EXPECT_EQ(rw[0].byte_len, msg.size());
  EXPECT_TRUE(msg == reply) << "echoed SEND differs";
}

INSTANTIATE_TEST_SUITE_P(Soft, TwoProcessTest, ::testing::Values(256u, 1024u, 4096u));

}  // namespace
}  // namespace rdmad::verbs::test
