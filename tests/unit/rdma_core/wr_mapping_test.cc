// The adapter's translations between the verbs interface and libibverbs, field by field.
#include "wr_mapping.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>

namespace rdmad::verbs::rdma_core {
namespace {

TEST(RdmaCoreWcStatus, EveryInterfaceStatusHasItsIbverbsStatus) {
  EXPECT_EQ(to_wc_status(IBV_WC_SUCCESS), WcStatus::kSuccess);
  EXPECT_EQ(to_wc_status(IBV_WC_LOC_LEN_ERR), WcStatus::kLocalLengthError);
  EXPECT_EQ(to_wc_status(IBV_WC_LOC_PROT_ERR), WcStatus::kLocalProtectionError);
  EXPECT_EQ(to_wc_status(IBV_WC_REM_ACCESS_ERR), WcStatus::kRemoteAccessError);
  EXPECT_EQ(to_wc_status(IBV_WC_REM_INV_REQ_ERR), WcStatus::kRemoteInvalidRequest);
  EXPECT_EQ(to_wc_status(IBV_WC_REM_OP_ERR), WcStatus::kRemoteOperationalError);
  EXPECT_EQ(to_wc_status(IBV_WC_RETRY_EXC_ERR), WcStatus::kRetryExceeded);
  EXPECT_EQ(to_wc_status(IBV_WC_RNR_RETRY_EXC_ERR), WcStatus::kRnrRetryExceeded);
  EXPECT_EQ(to_wc_status(IBV_WC_WR_FLUSH_ERR), WcStatus::kWrFlushed);
  EXPECT_EQ(to_wc_status(IBV_WC_LOC_QP_OP_ERR), WcStatus::kLocalQpOperationError);
}

TEST(RdmaCoreWcStatus, StatusesWithoutAnInterfaceNameAreGeneralErrors) {
  for (ibv_wc_status s :
       {IBV_WC_LOC_EEC_OP_ERR, IBV_WC_MW_BIND_ERR, IBV_WC_BAD_RESP_ERR,
        IBV_WC_LOC_ACCESS_ERR, IBV_WC_REM_ABORT_ERR, IBV_WC_FATAL_ERR, IBV_WC_GENERAL_ERR}) {
    EXPECT_EQ(to_wc_status(s), WcStatus::kGeneralError) << ibv_wc_status_str(s);
  }
}

TEST(RdmaCoreWorkCompletion, CopiesFieldsAndConvertsImmediateToHostOrder) {
  ibv_wc wc{};
  wc.wr_id = 0xdeadbeefcafe;
  wc.status = IBV_WC_SUCCESS;
  wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
  wc.wc_flags = IBV_WC_WITH_IMM;
  wc.imm_data = htonl(0x01020304);
  wc.qp_num = 0x1234;
  wc.byte_len = 4096;
  WorkCompletion out;
  to_work_completion(wc, out);
  EXPECT_EQ(out.wr_id, 0xdeadbeefcafeu);
  EXPECT_EQ(out.status, WcStatus::kSuccess);
  EXPECT_EQ(out.opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_TRUE(out.has_imm);
  EXPECT_EQ(out.imm_data, 0x01020304u);
  EXPECT_EQ(out.qp_num, 0x1234u);
  EXPECT_EQ(out.byte_len, 4096u);
  wc.wc_flags = 0;
  wc.opcode = IBV_WC_RDMA_READ;
  to_work_completion(wc, out);
  EXPECT_FALSE(out.has_imm);
  EXPECT_EQ(out.imm_data, 0u);
  EXPECT_EQ(out.opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(to_wc_opcode(IBV_WC_SEND), WcOpcode::kSend);
  EXPECT_EQ(to_wc_opcode(IBV_WC_RDMA_WRITE), WcOpcode::kRdmaWrite);
  EXPECT_EQ(to_wc_opcode(IBV_WC_RECV), WcOpcode::kRecv);
}

SendWr sample(WrOpcode op) {
  SendWr w;
  w.wr_id = 77;
  w.opcode = op;
  w.sge = {0x7f0000001000, 8192, 0xabc};
  w.remote_addr = 0x5500000000;
  w.rkey = 0x4321;
  w.imm_data = 0xa1b2c3d4;
  w.signaled = true;
  return w;
}

TEST(RdmaCoreSendWr, RdmaWriteWithImmFieldByField) {
  ibv_send_wr out;
  std::memset(&out, 0xff, sizeof out);  // garbage must not leak through
  ibv_sge sge{};
  to_ibv_send_wr(sample(WrOpcode::kRdmaWriteWithImm), out, sge);
  EXPECT_EQ(out.wr_id, 77u);
  EXPECT_EQ(out.next, nullptr);
  EXPECT_EQ(out.opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
  EXPECT_EQ(out.send_flags, static_cast<unsigned>(IBV_SEND_SIGNALED));
  ASSERT_EQ(out.num_sge, 1);
  EXPECT_EQ(out.sg_list, &sge);
  EXPECT_EQ(sge.addr, 0x7f0000001000u);
  EXPECT_EQ(sge.length, 8192u);
  EXPECT_EQ(sge.lkey, 0xabcu);
  EXPECT_EQ(out.wr.rdma.remote_addr, 0x5500000000u);
  EXPECT_EQ(out.wr.rdma.rkey, 0x4321u);
  EXPECT_EQ(out.imm_data, htonl(0xa1b2c3d4));
}

TEST(RdmaCoreSendWr, OpcodesFlagsAndUnusedFields) {
  ibv_send_wr out{};
  ibv_sge sge{};
  auto w = sample(WrOpcode::kSend);
  w.signaled = false;
  to_ibv_send_wr(w, out, sge);
  EXPECT_EQ(out.opcode, IBV_WR_SEND);
  EXPECT_EQ(out.send_flags, 0u);
  EXPECT_EQ(out.imm_data, 0u) << "plain SEND carries no immediate";
  EXPECT_EQ(out.wr.rdma.remote_addr, 0u) << "SEND has no remote address";
  to_ibv_send_wr(sample(WrOpcode::kSendWithImm), out, sge);
  EXPECT_EQ(out.opcode, IBV_WR_SEND_WITH_IMM);
  EXPECT_EQ(out.imm_data, htonl(0xa1b2c3d4));
  to_ibv_send_wr(sample(WrOpcode::kRdmaRead), out, sge);
  EXPECT_EQ(out.opcode, IBV_WR_RDMA_READ);
  EXPECT_EQ(out.wr.rdma.rkey, 0x4321u);
  EXPECT_EQ(out.imm_data, 0u);
  to_ibv_send_wr(sample(WrOpcode::kRdmaWrite), out, sge);
  EXPECT_EQ(out.opcode, IBV_WR_RDMA_WRITE);
  EXPECT_EQ(out.wr.rdma.remote_addr, 0x5500000000u);
  w = sample(WrOpcode::kSend);
  w.sge.length = 0;
  to_ibv_send_wr(w, out, sge);
  EXPECT_EQ(out.num_sge, 0) << "a zero-length SEND has no SGE";
}

TEST(RdmaCoreRecvWr, FieldByField) {
  RecvWr w{99, {0x1000, 512, 0x77}};
  ibv_recv_wr out;
  std::memset(&out, 0xff, sizeof out);
  ibv_sge sge{};
  to_ibv_recv_wr(w, out, sge);
  EXPECT_EQ(out.wr_id, 99u);
  EXPECT_EQ(out.next, nullptr);
  EXPECT_EQ(out.num_sge, 1);
  EXPECT_EQ(sge.addr, 0x1000u);
  EXPECT_EQ(sge.length, 512u);
  EXPECT_EQ(sge.lkey, 0x77u);
}

TEST(RdmaCoreAccess, RemoteWriteImpliesLocalWrite) {
  EXPECT_EQ(to_ibv_access(0), 0);
  EXPECT_EQ(to_ibv_access(kAccessLocalWrite), IBV_ACCESS_LOCAL_WRITE);
  EXPECT_EQ(to_ibv_access(kAccessRemoteRead), IBV_ACCESS_REMOTE_READ);
  EXPECT_EQ(to_ibv_access(kAccessRemoteWrite), IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE);
}

TEST(RdmaCoreMtu, OnlyIbMtus) {
  EXPECT_EQ(to_ibv_mtu(256), IBV_MTU_256);
  EXPECT_EQ(to_ibv_mtu(1024), IBV_MTU_1024);
  EXPECT_EQ(to_ibv_mtu(4096), IBV_MTU_4096);
  EXPECT_FALSE(to_ibv_mtu(1000));
  EXPECT_FALSE(to_ibv_mtu(9000));
}

TEST(RdmaCoreQpAttr, ResetToInitAddsPortAndPkey) {
  QpAttr a;
  a.state = QpState::kInit;
  a.access_flags = kAccessRemoteWrite | kAccessRemoteRead;
  PathConfig path;
  path.port_num = 2;
  const auto t = to_ibv_qp_attr(a, kQpState | kQpAccessFlags, path);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->mask, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PORT | IBV_QP_PKEY_INDEX);
  EXPECT_EQ(t->attr.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(t->attr.port_num, 2);
  EXPECT_EQ(t->attr.pkey_index, 0);
  EXPECT_EQ(t->attr.qp_access_flags,
            static_cast<unsigned>(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ));
}

TEST(RdmaCoreQpAttr, InitToRtrOnRoceCarriesTheGrh) {
  QpAttr a;
  a.state = QpState::kRtr;
  a.path_mtu_bytes = 2048;
  a.dest_qp_num = 0x1000abc;  // only 24 bits are a QPN
  a.rq_psn = 0xfffff0;
  a.min_rnr_timer = 5;
  a.max_dest_rd_atomic = 8;
  a.dest_gid = *Gid::from_ip("10.10.1.12");
  PathConfig path;
  path.port_num = 1;
  path.sgid_index = 3;
  path.dscp = 26;
  path.hop_limit = 64;
  const uint32_t mask =
      kQpState | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpAv | kQpMinRnrTimer | kQpMaxDestRdAtomic;
  const auto t = to_ibv_qp_attr(a, mask, path);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->mask, IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_AV |
                         IBV_QP_MIN_RNR_TIMER | IBV_QP_MAX_DEST_RD_ATOMIC);
  EXPECT_EQ(t->attr.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(t->attr.path_mtu, IBV_MTU_2048);
  EXPECT_EQ(t->attr.dest_qp_num, 0xabcu);
  EXPECT_EQ(t->attr.rq_psn, 0xfffff0u);
  EXPECT_EQ(t->attr.min_rnr_timer, 5);
  EXPECT_EQ(t->attr.max_dest_rd_atomic, 8);
  const ibv_ah_attr& ah = t->attr.ah_attr;
  EXPECT_EQ(ah.is_global, 1);
  EXPECT_EQ(ah.port_num, 1);
  EXPECT_EQ(ah.dlid, 0);
  EXPECT_EQ(ah.grh.sgid_index, 3);
  EXPECT_EQ(ah.grh.hop_limit, 64);
  EXPECT_EQ(ah.grh.traffic_class, (26 << 2) | 0x2) << "DSCP 26 with ECT(0)";
  EXPECT_EQ(0, std::memcmp(ah.grh.dgid.raw, a.dest_gid.raw.data(), 16));
}

TEST(RdmaCoreQpAttr, InfinibandPathUsesTheLid) {
  QpAttr a;
  PathConfig path;
  path.roce = false;
  path.dlid = 0x1a;
  path.sl = 3;
  const auto t = to_ibv_qp_attr(a, kQpAv, path);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->mask, IBV_QP_AV);
  EXPECT_EQ(t->attr.ah_attr.is_global, 0);
  EXPECT_EQ(t->attr.ah_attr.dlid, 0x1a);
  EXPECT_EQ(t->attr.ah_attr.sl, 3);
}

// A peer in the same subnet (its port GID has our subnet prefix) is reached by LID alone; one
// behind a router needs a GRH with its GID, from our port GID. The SL is the NIC's configured one.
TEST(RdmaCoreQpAttr, InfinibandAddsAGrhOnlyTowardAnotherSubnet) {
  const Gid ours = *Gid::from_ip("fe80::e41d:2d03:a:1b30");
  const Gid same_subnet = *Gid::from_ip("fe80::e41d:2d03:a:2c41");
  const Gid other_subnet = *Gid::from_ip("fec0:0:0:7:e41d:2d03:a:2c41");
  PathConfig path;
  path.roce = false;
  path.port_num = 1;
  path.dlid = 0x2a;
  path.sl = 5;
  path.sgid_index = 0;
  path.sgid = ours.raw;
  QpAttr a;
  a.dest_lid = 0x2a;
  a.dest_gid = same_subnet;
  auto t = to_ibv_qp_attr(a, kQpAv, path);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->attr.ah_attr.is_global, 0) << "no GRH inside the subnet";
  EXPECT_EQ(t->attr.ah_attr.dlid, 0x2a);
  EXPECT_EQ(t->attr.ah_attr.sl, 5);
  a.dest_gid = Gid{};
  t = to_ibv_qp_attr(a, kQpAv, path);
  EXPECT_EQ(t->attr.ah_attr.is_global, 0) << "a peer that sent no GID";
  a.dest_gid = other_subnet;
  t = to_ibv_qp_attr(a, kQpAv, path);
  ASSERT_TRUE(t);
  const ibv_ah_attr& ah = t->attr.ah_attr;
  EXPECT_EQ(ah.is_global, 1);
  EXPECT_EQ(ah.dlid, 0x2a) << "the router's LID, as the peer's endpoint gives it";
  EXPECT_EQ(ah.sl, 5);
  EXPECT_EQ(0, std::memcmp(ah.grh.dgid.raw, other_subnet.raw.data(), 16));
  EXPECT_EQ(ah.grh.sgid_index, 0);
  EXPECT_EQ(ah.grh.hop_limit, 64);
  EXPECT_TRUE(needs_grh(ours.raw, other_subnet.raw));
  EXPECT_FALSE(needs_grh(ours.raw, same_subnet.raw));
}

TEST(RdmaCoreQpAttr, RocePathCarriesTheConfiguredSlAndDscp) {
  QpAttr a;
  a.dest_gid = *Gid::from_ip("10.1.0.2");
  PathConfig path;
  path.sgid_index = 1;
  path.dscp = 46;
  path.sl = 3;
  const auto t = to_ibv_qp_attr(a, kQpAv, path);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->attr.ah_attr.is_global, 1);
  EXPECT_EQ(t->attr.ah_attr.sl, 3);
  EXPECT_EQ(t->attr.ah_attr.grh.traffic_class, (46 << 2) | 0x2);
}

TEST(RdmaCoreQpAttr, RtrToRtsAndUnselectedFieldsStayOut) {
  QpAttr a;
  a.state = QpState::kRts;
  a.sq_psn = 0x1123456;
  a.timeout = 12;
  a.retry_cnt = 6;
  a.rnr_retry = 7;
  a.max_rd_atomic = 4;
  a.path_mtu_bytes = 1000;  // invalid but not selected
  const auto t = to_ibv_qp_attr(
      a, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxRdAtomic, PathConfig{});
  ASSERT_TRUE(t);
  EXPECT_EQ(t->mask, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                         IBV_QP_MAX_QP_RD_ATOMIC);
  EXPECT_EQ(t->attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(t->attr.sq_psn, 0x123456u);
  EXPECT_EQ(t->attr.timeout, 12);
  EXPECT_EQ(t->attr.retry_cnt, 6);
  EXPECT_EQ(t->attr.rnr_retry, 7);
  EXPECT_EQ(t->attr.max_rd_atomic, 4);
  EXPECT_EQ(t->attr.ah_attr.is_global, 0) << "no address vector without kQpAv";
}

TEST(RdmaCoreQpAttr, BadPathMtuIsRejected) {
  QpAttr a;
  a.path_mtu_bytes = 1500;
  EXPECT_FALSE(to_ibv_qp_attr(a, kQpPathMtu, PathConfig{}));
}

TEST(RdmaCoreQpState, RoundTrip) {
  for (QpState s : {QpState::kReset, QpState::kInit, QpState::kRtr, QpState::kRts, QpState::kError}) {
    EXPECT_EQ(from_ibv_state(to_ibv_state(s)), s);
  }
  EXPECT_EQ(from_ibv_state(IBV_QPS_SQE), QpState::kError);
}

TEST(RdmaCoreQpAttr, MergeKeepsUnselectedFields) {
  QpAttr current;
  current.state = QpState::kRtr;
  current.dest_qp_num = 0x42;
  current.path_mtu_bytes = 2048;
  QpAttr next;  // defaults everywhere except what the modify selects
  next.state = QpState::kRts;
  next.sq_psn = 0x777;
  merge_qp_attr(next, kQpState | kQpSqPsn, current);
  EXPECT_EQ(current.state, QpState::kRts);
  EXPECT_EQ(current.sq_psn, 0x777u);
  EXPECT_EQ(current.dest_qp_num, 0x42u);
  EXPECT_EQ(current.path_mtu_bytes, 2048u);
  next.dest_gid = *Gid::from_ip("10.0.0.9");
  next.state = QpState::kError;
  merge_qp_attr(next, kQpAv, current);
  EXPECT_EQ(current.dest_gid.to_ip_string(), "10.0.0.9");
  EXPECT_EQ(current.state, QpState::kRts);
}

}  // namespace
}  // namespace rdmad::verbs::rdma_core
