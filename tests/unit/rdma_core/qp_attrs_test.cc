#include "qp_attrs.h"

#include <gtest/gtest.h>

#include <cstring>

namespace rdmad::verbs::rdma_core {
namespace {

TEST(RdmaCoreQpAttrs, TrafficClassCarriesDscpAndEct) {
  EXPECT_EQ(traffic_class(26, true), 106);  // 26 << 2 | ECT(0)
  EXPECT_EQ(traffic_class(26, false), 104);
  EXPECT_EQ(traffic_class(48, true), 0xc2);
  EXPECT_EQ(traffic_class(0xff, false), 0xfc);  // DSCP is six bits
}

TEST(RdmaCoreQpAttrs, InitSetsPortPkeyAndAccess) {
  RcQpConfig cfg;
  cfg.port_num = 2;
  cfg.pkey_index = 3;
  cfg.access_flags = IBV_ACCESS_REMOTE_WRITE;
  const auto t = rc_init(cfg);
  EXPECT_EQ(t.mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  EXPECT_EQ(t.attr.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(t.attr.port_num, 2);
  EXPECT_EQ(t.attr.pkey_index, 3);
  EXPECT_EQ(t.attr.qp_access_flags, static_cast<unsigned>(IBV_ACCESS_REMOTE_WRITE));
}

TEST(RdmaCoreQpAttrs, RtrOverRoceCarriesAGrh) {
  RcQpConfig cfg;
  cfg.path_mtu = IBV_MTU_1024;
  RocePath path;
  path.dgid = parse_gid("::ffff:10.10.1.12").value();
  path.sgid_index = 3;
  path.dscp = 26;
  path.hop_limit = 5;
  path.flow_label = 0x1fffff;  // 20 bits on the wire
  path.sl = 3;
  const auto t = rc_rtr(cfg, RcRemote{0x1234567, 0xabcdef12, path});
  EXPECT_EQ(t.mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  EXPECT_EQ(t.attr.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(t.attr.path_mtu, IBV_MTU_1024);
  EXPECT_EQ(t.attr.dest_qp_num, 0x234567u);  // 24-bit QPN
  EXPECT_EQ(t.attr.rq_psn, 0xcdef12u);       // 24-bit PSN
  EXPECT_EQ(t.attr.max_dest_rd_atomic, 16);
  EXPECT_EQ(t.attr.min_rnr_timer, 12);
  const auto& ah = t.attr.ah_attr;
  EXPECT_EQ(ah.is_global, 1);
  EXPECT_EQ(ah.dlid, 0);
  EXPECT_EQ(ah.sl, 3);
  EXPECT_EQ(ah.port_num, 1);
  EXPECT_EQ(ah.grh.sgid_index, 3);
  EXPECT_EQ(ah.grh.hop_limit, 5);
  EXPECT_EQ(ah.grh.traffic_class, 106);
  EXPECT_EQ(ah.grh.flow_label, 0xfffffu);
  EXPECT_EQ(std::memcmp(ah.grh.dgid.raw, path.dgid.data(), 16), 0);
}

TEST(RdmaCoreQpAttrs, RtrOverInfinibandUsesLidAndSl) {
  RcQpConfig cfg;
  cfg.port_num = 1;
  const auto t = rc_rtr(cfg, RcRemote{0x42, 7, IbPath{0x1a, 2, 1}});
  const auto& ah = t.attr.ah_attr;
  EXPECT_EQ(ah.is_global, 0);
  EXPECT_EQ(ah.dlid, 0x1a);
  EXPECT_EQ(ah.sl, 2);
  EXPECT_EQ(ah.src_path_bits, 1);
  EXPECT_EQ(ah.port_num, 1);
  EXPECT_EQ(t.attr.dest_qp_num, 0x42u);
  EXPECT_EQ(t.attr.rq_psn, 7u);
  EXPECT_TRUE(t.mask & IBV_QP_AV);
}

TEST(RdmaCoreQpAttrs, RtsSetsTimeoutsRetriesAndSendPsn) {
  RcQpConfig cfg;
  cfg.timeout = 18;
  cfg.retry_cnt = 5;
  cfg.rnr_retry = 6;
  cfg.max_rd_atomic = 8;
  const auto t = rc_rts(cfg, 0x1000001);
  EXPECT_EQ(t.mask, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_MAX_QP_RD_ATOMIC);
  EXPECT_EQ(t.attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(t.attr.sq_psn, 1u);
  EXPECT_EQ(t.attr.timeout, 18);
  EXPECT_EQ(t.attr.retry_cnt, 5);
  EXPECT_EQ(t.attr.rnr_retry, 6);
  EXPECT_EQ(t.attr.max_rd_atomic, 8);
  // RTS must not touch attributes owned by earlier transitions.
  EXPECT_FALSE(t.mask & (IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_PORT));
}

}  // namespace
}  // namespace rdmad::verbs::rdma_core
