#pragma once
// Pure translations between the transport interface (rdmad::verbs) and libibverbs: work requests,
// completions, access flags, MTUs, QP states and QpAttr + mask. No I/O, no allocation: the datapath
// calls these per work request.
#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>

#include "qp_attrs.h"
#include "rdmad/verbs/types.h"

namespace rdmad::verbs::rdma_core {

/// ibv_wc_status → WcStatus; statuses the interface has no name for become kGeneralError.
WcStatus to_wc_status(ibv_wc_status s);
/// ibv_wc_opcode → WcOpcode (atomics, which the interface does not post, map to kRdmaRead).
WcOpcode to_wc_opcode(ibv_wc_opcode op);
/// One ibv_wc as a WorkCompletion (immediate data converted to host order).
void to_work_completion(const ibv_wc& wc, WorkCompletion& out);

/// WrOpcode → ibv_wr_opcode.
ibv_wr_opcode to_ibv_opcode(WrOpcode op);
/// Access bits → ibv_access_flags (LOCAL_WRITE is added whenever remote write is asked, as ibverbs
/// requires).
int to_ibv_access(uint32_t access);
/// 256..4096 → IBV_MTU_*; nullopt for any other size.
std::optional<ibv_mtu> to_ibv_mtu(uint32_t bytes);
ibv_qp_state to_ibv_state(QpState s);
QpState from_ibv_state(ibv_qp_state s);

/// Fills `out` (next = nullptr) from `wr`, with its one SGE in `sge` (num_sge 0 for a zero-length
/// WR). Imm data goes out in network order as ibverbs expects.
void to_ibv_send_wr(const SendWr& wr, ibv_send_wr& out, ibv_sge& sge);
void to_ibv_recv_wr(const RecvWr& wr, ibv_recv_wr& out, ibv_sge& sge);

/// How a port addresses its peers: RoCE (GRH from the selected source GID, DSCP with ECT, SL) or
/// InfiniBand (LID + SL, and a GRH from the source GID only toward a GID of another subnet).
struct PathConfig {
  uint8_t port_num = 1;
  bool roce = true;
  uint8_t sgid_index = 0;
  GidBytes sgid{};  // InfiniBand: the port GID whose subnet prefix tells another subnet apart
  uint8_t dscp = 26;
  uint8_t hop_limit = 64;
  uint8_t sl = 0;
  uint16_t dlid = 0;  // InfiniBand: the peer's LID
};

/// InfiniBand: true when `dgid` is a GID (non-zero) whose subnet prefix (its upper 64 bits) is not
/// the one of `sgid`, so packets to it cross a router and need a GRH.
bool needs_grh(const GidBytes& sgid, const GidBytes& dgid);

/// QpAttr + QpAttrMask → ibv_qp_attr + ibv_qp_attr_mask. A transition to INIT also sets the port and
/// P_Key index (ibverbs requires them); kQpAv becomes the address vector of `path` (RoCE: GRH to
/// dest_gid; InfiniBand: path.dlid and SL, a GRH to dest_gid only where needs_grh). nullopt when a
/// selected field has no ibverbs value (a path MTU other than 256..4096).
std::optional<QpTransition> to_ibv_qp_attr(const QpAttr& attr, uint32_t mask, const PathConfig& path);

/// Copies the fields `mask` selects from `in` into `out` (what a QP reports after a modify).
void merge_qp_attr(const QpAttr& in, uint32_t mask, QpAttr& out);

}  // namespace rdmad::verbs::rdma_core
