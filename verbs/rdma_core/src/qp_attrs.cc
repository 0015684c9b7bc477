#include "qp_attrs.h"

#include <cstring>

namespace rdmad::verbs::rdma_core {

namespace {

constexpr uint32_t kPsnMask = 0xffffff;
constexpr uint32_t kFlowLabelMask = 0xfffff;

void fill_av(ibv_ah_attr& ah, const RcQpConfig& cfg, const RocePath& p) {
  ah.is_global = 1;
  ah.port_num = cfg.port_num;
  ah.sl = p.sl;
  ah.dlid = 0;  // RoCE has no LIDs
  std::memcpy(ah.grh.dgid.raw, p.dgid.data(), p.dgid.size());
  ah.grh.sgid_index = p.sgid_index;
  ah.grh.hop_limit = p.hop_limit;
  ah.grh.traffic_class = traffic_class(p.dscp, p.ect);
  ah.grh.flow_label = p.flow_label & kFlowLabelMask;
}

void fill_av(ibv_ah_attr& ah, const RcQpConfig& cfg, const IbPath& p) {
  ah.is_global = p.grh ? 1 : 0;
  ah.port_num = cfg.port_num;
  ah.dlid = p.dlid;
  ah.sl = p.sl;
  ah.src_path_bits = p.src_path_bits;
  if (p.grh) {
    std::memcpy(ah.grh.dgid.raw, p.dgid.data(), p.dgid.size());
    ah.grh.sgid_index = p.sgid_index;
    ah.grh.hop_limit = p.hop_limit;
    ah.grh.traffic_class = p.traffic_class;
  }
}

}  // namespace

QpTransition rc_init(const RcQpConfig& cfg) {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_INIT;
  t.attr.pkey_index = cfg.pkey_index;
  t.attr.port_num = cfg.port_num;
  t.attr.qp_access_flags = cfg.access_flags;
  t.mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  return t;
}

QpTransition rc_rtr(const RcQpConfig& cfg, const RcRemote& remote) {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_RTR;
  t.attr.path_mtu = cfg.path_mtu;
  t.attr.dest_qp_num = remote.qpn & kPsnMask;
  t.attr.rq_psn = remote.psn & kPsnMask;
  t.attr.max_dest_rd_atomic = cfg.max_dest_rd_atomic;
  t.attr.min_rnr_timer = cfg.min_rnr_timer;
  std::visit([&](const auto& p) { fill_av(t.attr.ah_attr, cfg, p); }, remote.path);
  t.mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  return t;
}

QpTransition rc_rts(const RcQpConfig& cfg, uint32_t sq_psn) {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_RTS;
  t.attr.sq_psn = sq_psn & kPsnMask;
  t.attr.timeout = cfg.timeout;
  t.attr.retry_cnt = cfg.retry_cnt;
  t.attr.rnr_retry = cfg.rnr_retry;
  t.attr.max_rd_atomic = cfg.max_rd_atomic;
  t.mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
           IBV_QP_MAX_QP_RD_ATOMIC;
  return t;
}

}  // namespace rdmad::verbs::rdma_core
