// The rdma_core backend through the verbs interface on a real device (NIC or Soft-RoCE): two RC QPs
// on the first device connected to each other through the port's selected GID, traffic byte-exact.
// Skips, with the reason, where libibverbs finds no device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "unit/verbs/verbs_test_util.h"

namespace rdmad::verbs::test {
namespace {

class RdmaCoreAdapterHw : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string skip;
    auto da = open_device("rdma_core", DeviceConfig{}, &skip);
    if (!da) GTEST_SKIP() << skip;
    auto port = da->query_port(1);
    ASSERT_TRUE(port.ok()) << port.status().message();
    if (port->state != PortState::kActive)
      GTEST_SKIP() << "port 1 of " << da->info().name << " is not ACTIVE";
    infiniband_ = port->link_layer == LinkLayer::kInfiniband;
    make_endpoint(a_, std::move(da));
    make_endpoint(b_, open_device("rdma_core", DeviceConfig{}, &skip));
    ConnectOptions o;
    o.mtu = std::min<uint32_t>(1024, port->active_mtu_bytes);
    connect_pair(a_, b_, o);
  }
  Endpoint a_, b_;
  bool infiniband_ = false;  // InfiniBand ports connect by LID (QpAttr::dest_lid), RoCE by GID
};

TEST_F(RdmaCoreAdapterHw, QueryPortReportsAnActiveRoceGid) {
  const auto p = a_.dev->query_port(1).value();
  if (infiniband_) {
    EXPECT_NE(p.lid, 0) << "an active InfiniBand port has a LID from the subnet manager";
    return;
  }
  EXPECT_NE(p.gid, Gid{}) << "no RoCE v2 GID selected: does the netdev have an IP address?";
  EXPECT_GT(p.active_mtu_bytes, 0u);
  EXPECT_EQ(a_.dev->info().backend, "rdma_core");
}

TEST_F(RdmaCoreAdapterHw, WriteWithImmAndSendAreByteExact) {
  std::vector<uint8_t> src(64 << 10), dst(src.size() + 128, 0xee), rbuf(4096, 0);
  fill_pattern(src, 7);
  auto smr = std::move(a_.pd->reg_mr(src.data(), src.size(), kAccessLocalWrite).value());
  auto dmr = std::move(
      b_.pd->reg_mr(dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead)
          .value());
  auto rmr = std::move(b_.pd->reg_mr(rbuf.data(), rbuf.size(), kAccessLocalWrite).value());
  RecvWr r[2] = {{1, {reinterpret_cast<uint64_t>(rbuf.data()), 4096, rmr->lkey()}},
                 {2, {reinterpret_cast<uint64_t>(rbuf.data()), 4096, rmr->lkey()}}};
  ASSERT_TRUE(b_.qp->post_recv(r).ok());
  SendWr w[2];
  w[0].wr_id = 10;
  w[0].opcode = WrOpcode::kRdmaWriteWithImm;
  w[0].sge = {reinterpret_cast<uint64_t>(src.data()), static_cast<uint32_t>(src.size()), smr->lkey()};
  w[0].remote_addr = reinterpret_cast<uint64_t>(dst.data()) + 64;
  w[0].rkey = dmr->rkey();
  w[0].imm_data = 0xfeedf00d;
  w[1].wr_id = 11;
  w[1].opcode = WrOpcode::kSend;
  w[1].sge = {reinterpret_cast<uint64_t>(src.data()), 1000, smr->lkey()};
  ASSERT_TRUE(a_.qp->post_send(w).ok());
  const auto sc = wait_completions(*a_.scq, 2);
  ASSERT_EQ(sc.size(), 2u);
  for (const auto& c : sc) EXPECT_EQ(c.status, WcStatus::kSuccess) << to_string(c.status);
  const auto rc = wait_completions(*b_.rcq, 2);
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_TRUE(rc[0].has_imm);
  EXPECT_EQ(rc[0].imm_data, 0xfeedf00du);
  EXPECT_EQ(rc[1].opcode, WcOpcode::kRecv);
  EXPECT_EQ(rc[1].byte_len, 1000u);
  EXPECT_EQ(0, std::memcmp(dst.data() + 64, src.data(), src.size()));
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(dst[i], 0xee) << "guard byte " << i;
  for (size_t i = 64 + src.size(); i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xee) << "guard byte " << i;
  EXPECT_EQ(0, std::memcmp(rbuf.data(), src.data(), 1000));
}

TEST_F(RdmaCoreAdapterHw, BadRkeyCompletesWithRemoteAccessErrorThenFlushes) {
  std::vector<uint8_t> src(4096, 1), dst(4096, 0);
  auto smr = std::move(a_.pd->reg_mr(src.data(), src.size(), kAccessLocalWrite).value());
  auto dmr = std::move(b_.pd->reg_mr(dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite).value());
  SendWr w[2];
  for (int i = 0; i < 2; ++i) {
    w[i].wr_id = static_cast<uint64_t>(i);
    w[i].opcode = WrOpcode::kRdmaWrite;
    w[i].sge = {reinterpret_cast<uint64_t>(src.data()), 4096, smr->lkey()};
    w[i].remote_addr = reinterpret_cast<uint64_t>(dst.data());
    w[i].rkey = dmr->rkey() ^ 0x5a5a00;
  }
  ASSERT_TRUE(a_.qp->post_send(w).ok());
  const auto sc = wait_completions(*a_.scq, 2);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].status, WcStatus::kRemoteAccessError);
  EXPECT_EQ(sc[1].status, WcStatus::kWrFlushed);
  EXPECT_EQ(a_.qp->query().state, QpState::kError);
  EXPECT_EQ(std::count(dst.begin(), dst.end(), 0), 4096);
}

TEST_F(RdmaCoreAdapterHw, CountersAreReadable) {
  const NicCounters before = a_.dev->counters();
  std::vector<uint8_t> buf(1 << 20, 3), dst(1 << 20, 0);
  auto smr = std::move(a_.pd->reg_mr(buf.data(), buf.size(), kAccessLocalWrite).value());
  auto dmr = std::move(b_.pd->reg_mr(dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite).value());
  SendWr w;
  w.opcode = WrOpcode::kRdmaWrite;
  w.sge = {reinterpret_cast<uint64_t>(buf.data()), static_cast<uint32_t>(buf.size()), smr->lkey()};
  w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
  w.rkey = dmr->rkey();
  ASSERT_TRUE(a_.qp->post_send({&w, 1}).ok());
  ASSERT_EQ(wait_completions(*a_.scq, 1).size(), 1u);
  EXPECT_EQ(dst, buf);
  const NicCounters after = a_.dev->counters();
  // Some providers count loopback on the wire, others not; the counters must at least not go back.
  EXPECT_GE(after.tx_bytes, before.tx_bytes);
  EXPECT_GE(after.rx_packets, before.rx_packets);
}

}  // namespace
}  // namespace rdmad::verbs::test
