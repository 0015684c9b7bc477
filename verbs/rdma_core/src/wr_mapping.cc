#include "wr_mapping.h"

#include <arpa/inet.h>

#include <algorithm>

namespace rdmad::verbs::rdma_core {

WcStatus to_wc_status(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS:
      return WcStatus::kSuccess;
    case IBV_WC_LOC_LEN_ERR:
      return WcStatus::kLocalLengthError;
    case IBV_WC_LOC_PROT_ERR:
      return WcStatus::kLocalProtectionError;
    case IBV_WC_REM_ACCESS_ERR:
      return WcStatus::kRemoteAccessError;
    case IBV_WC_REM_INV_REQ_ERR:
      return WcStatus::kRemoteInvalidRequest;
    case IBV_WC_REM_OP_ERR:
      return WcStatus::kRemoteOperationalError;
    case IBV_WC_RETRY_EXC_ERR:
      return WcStatus::kRetryExceeded;
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return WcStatus::kRnrRetryExceeded;
    case IBV_WC_WR_FLUSH_ERR:
      return WcStatus::kWrFlushed;
    case IBV_WC_LOC_QP_OP_ERR:
      return WcStatus::kLocalQpOperationError;
    default:
      return WcStatus::kGeneralError;
  }
}

WcOpcode to_wc_opcode(ibv_wc_opcode op) {
  switch (op) {
    case IBV_WC_SEND:
      return WcOpcode::kSend;
    case IBV_WC_RDMA_WRITE:
      return WcOpcode::kRdmaWrite;
    case IBV_WC_RECV:
      return WcOpcode::kRecv;
    case IBV_WC_RECV_RDMA_WITH_IMM:
      return WcOpcode::kRecvRdmaWithImm;
    default:
      return WcOpcode::kRdmaRead;
  }
}

void to_work_completion(const ibv_wc& wc, WorkCompletion& out) {
  out.wr_id = wc.wr_id;
  out.status = to_wc_status(wc.status);
  out.opcode = to_wc_opcode(wc.opcode);
  out.has_imm = (wc.wc_flags & IBV_WC_WITH_IMM) != 0;
  out.qp_num = wc.qp_num;
  out.byte_len = wc.byte_len;
  out.imm_data = out.has_imm ? ntohl(wc.imm_data) : 0;
}

ibv_wr_opcode to_ibv_opcode(WrOpcode op) {
  switch (op) {
    case WrOpcode::kSend:
      return IBV_WR_SEND;
    case WrOpcode::kSendWithImm:
      return IBV_WR_SEND_WITH_IMM;
    case WrOpcode::kRdmaWrite:
      return IBV_WR_RDMA_WRITE;
    case WrOpcode::kRdmaWriteWithImm:
      return IBV_WR_RDMA_WRITE_WITH_IMM;
    case WrOpcode::kRdmaRead:
      return IBV_WR_RDMA_READ;
  }
  return IBV_WR_SEND;
}

int to_ibv_access(uint32_t access) {
  int f = 0;
  if (access & kAccessLocalWrite) f |= IBV_ACCESS_LOCAL_WRITE;
  if (access & kAccessRemoteWrite) f |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  if (access & kAccessRemoteRead) f |= IBV_ACCESS_REMOTE_READ;
  return f;
}

std::optional<ibv_mtu> to_ibv_mtu(uint32_t bytes) {
  switch (bytes) {
    case 256:
      return IBV_MTU_256;
    case 512:
      return IBV_MTU_512;
    case 1024:
      return IBV_MTU_1024;
    case 2048:
      return IBV_MTU_2048;
    case 4096:
      return IBV_MTU_4096;
    default:
      return std::nullopt;
  }
}

ibv_qp_state to_ibv_state(QpState s) {
  switch (s) {
    case QpState::kReset:
      return IBV_QPS_RESET;
    case QpState::kInit:
      return IBV_QPS_INIT;
    case QpState::kRtr:
      return IBV_QPS_RTR;
    case QpState::kRts:
      return IBV_QPS_RTS;
    case QpState::kError:
      return IBV_QPS_ERR;
  }
  return IBV_QPS_ERR;
}

QpState from_ibv_state(ibv_qp_state s) {
  switch (s) {
    case IBV_QPS_RESET:
      return QpState::kReset;
    case IBV_QPS_INIT:
      return QpState::kInit;
    case IBV_QPS_RTR:
      return QpState::kRtr;
    case IBV_QPS_RTS:
      return QpState::kRts;
    default:
      return QpState::kError;  // SQD/SQE are not reached by RC QPs the interface drives
  }
}

void to_ibv_send_wr(const SendWr& wr, ibv_send_wr& out, ibv_sge& sge) {
  out = ibv_send_wr{};
  sge.addr = wr.sge.addr;
  sge.length = wr.sge.length;
  sge.lkey = wr.sge.lkey;
  out.wr_id = wr.wr_id;
  out.sg_list = &sge;
  out.num_sge = wr.sge.length == 0 ? 0 : 1;
  out.opcode = to_ibv_opcode(wr.opcode);
  out.send_flags = wr.signaled ? IBV_SEND_SIGNALED : 0;
  if (wr.opcode == WrOpcode::kSendWithImm || wr.opcode == WrOpcode::kRdmaWriteWithImm) {
    out.imm_data = htonl(wr.imm_data);
  }
  if (wr.opcode == WrOpcode::kRdmaWrite || wr.opcode == WrOpcode::kRdmaWriteWithImm ||
      wr.opcode == WrOpcode::kRdmaRead) {
    out.wr.rdma.remote_addr = wr.remote_addr;
    out.wr.rdma.rkey = wr.rkey;
  }
}

void to_ibv_recv_wr(const RecvWr& wr, ibv_recv_wr& out, ibv_sge& sge) {
  sge.addr = wr.sge.addr;
  sge.length = wr.sge.length;
  sge.lkey = wr.sge.lkey;
  out.wr_id = wr.wr_id;
  out.next = nullptr;
  out.sg_list = &sge;
  out.num_sge = wr.sge.length == 0 ? 0 : 1;
}

std::optional<QpTransition> to_ibv_qp_attr(const QpAttr& a, uint32_t mask, const PathConfig& path) {
  QpTransition t;
  int& m = t.mask;
  ibv_qp_attr& o = t.attr;
  if (mask & kQpState) {
    o.qp_state = to_ibv_state(a.state);
    m |= IBV_QP_STATE;
    if (a.state == QpState::kInit) {
      o.port_num = path.port_num;
      o.pkey_index = 0;
      m |= IBV_QP_PORT | IBV_QP_PKEY_INDEX;
    }
  }
  if (mask & kQpAccessFlags) {
    o.qp_access_flags = static_cast<unsigned>(to_ibv_access(a.access_flags) | IBV_ACCESS_LOCAL_WRITE);
    m |= IBV_QP_ACCESS_FLAGS;
  }
  if (mask & kQpPathMtu) {
    const auto mtu = to_ibv_mtu(a.path_mtu_bytes);
    if (!mtu) return std::nullopt;
    o.path_mtu = *mtu;
    m |= IBV_QP_PATH_MTU;
  }
  constexpr uint32_t k24 = 0xffffff;
  if (mask & kQpDestQpn) {
    o.dest_qp_num = a.dest_qp_num & k24;
    m |= IBV_QP_DEST_QPN;
  }
  if (mask & kQpRqPsn) {
    o.rq_psn = a.rq_psn & k24;
    m |= IBV_QP_RQ_PSN;
  }
  if (mask & kQpSqPsn) {
    o.sq_psn = a.sq_psn & k24;
    m |= IBV_QP_SQ_PSN;
  }
  if (mask & kQpTimeout) {
    o.timeout = a.timeout;
    m |= IBV_QP_TIMEOUT;
  }
  if (mask & kQpRetryCnt) {
    o.retry_cnt = a.retry_cnt;
    m |= IBV_QP_RETRY_CNT;
  }
  if (mask & kQpRnrRetry) {
    o.rnr_retry = a.rnr_retry;
    m |= IBV_QP_RNR_RETRY;
  }
  if (mask & kQpMinRnrTimer) {
    o.min_rnr_timer = a.min_rnr_timer;
    m |= IBV_QP_MIN_RNR_TIMER;
  }
  if (mask & kQpMaxRdAtomic) {
    o.max_rd_atomic = a.max_rd_atomic;
    m |= IBV_QP_MAX_QP_RD_ATOMIC;
  }
  if (mask & kQpMaxDestRdAtomic) {
    o.max_dest_rd_atomic = a.max_dest_rd_atomic;
    m |= IBV_QP_MAX_DEST_RD_ATOMIC;
  }
  if (mask & kQpAv) {
    // The address vector comes from the same builder the hardware suite's loopback uses.
    RcQpConfig cfg;
    cfg.port_num = path.port_num;
    RcRemote remote;
    if (path.roce) {
      RocePath p;
      p.dgid = a.dest_gid.raw;
      p.sgid_index = path.sgid_index;
      p.dscp = path.dscp;
      p.hop_limit = path.hop_limit;
      p.sl = path.sl;
      remote.path = p;
    } else {
      IbPath p{.dlid = path.dlid, .sl = path.sl};
      if (needs_grh(path.sgid, a.dest_gid.raw)) {
        p.grh = true;
        p.dgid = a.dest_gid.raw;
        p.sgid_index = path.sgid_index;
        p.hop_limit = path.hop_limit;
      }
      remote.path = p;
    }
    o.ah_attr = rc_rtr(cfg, remote).attr.ah_attr;
    m |= IBV_QP_AV;
  }
  return t;
}

bool needs_grh(const GidBytes& sgid, const GidBytes& dgid) {
  const GidBytes zero{};
  if (dgid == zero) return false;
  return !std::equal(sgid.begin(), sgid.begin() + 8, dgid.begin());
}

void merge_qp_attr(const QpAttr& in, uint32_t mask, QpAttr& out) {
  if (mask & kQpState) out.state = in.state;
  if (mask & kQpAccessFlags) out.access_flags = in.access_flags;
  if (mask & kQpPathMtu) out.path_mtu_bytes = in.path_mtu_bytes;
  if (mask & kQpDestQpn) out.dest_qp_num = in.dest_qp_num;
  if (mask & kQpRqPsn) out.rq_psn = in.rq_psn;
  if (mask & kQpSqPsn) out.sq_psn = in.sq_psn;
  if (mask & kQpTimeout) out.timeout = in.timeout;
  if (mask & kQpRetryCnt) out.retry_cnt = in.retry_cnt;
  if (mask & kQpRnrRetry) out.rnr_retry = in.rnr_retry;
  if (mask & kQpMinRnrTimer) out.min_rnr_timer = in.min_rnr_timer;
  if (mask & kQpMaxRdAtomic) out.max_rd_atomic = in.max_rd_atomic;
  if (mask & kQpMaxDestRdAtomic) out.max_dest_rd_atomic = in.max_dest_rd_atomic;
  if (mask & kQpAv) {
    out.dest_gid = in.dest_gid;
    out.dest_udp_port = in.dest_udp_port;
    out.dest_lid = in.dest_lid;
  }
}

}  // namespace rdmad::verbs::rdma_core
