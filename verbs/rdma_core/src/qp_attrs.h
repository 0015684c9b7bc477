#pragma once
// RC queue-pair bring-up as pure functions: each builds the ibv_qp_attr and attribute mask of one
// transition (RESET→INIT→RTR→RTS) for ibv_modify_qp. RoCE paths carry a GRH (source GID index,
// destination GID, traffic class = DSCP with ECT, hop limit); InfiniBand paths a LID and SL.
#include <infiniband/verbs.h>

#include <cstdint>
#include <variant>

#include "gid_table.h"

namespace rdmad::verbs::rdma_core {

struct RcQpConfig {
  uint8_t port_num = 1;
  uint16_t pkey_index = 0;
  unsigned access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  ibv_mtu path_mtu = IBV_MTU_4096;
  uint8_t max_rd_atomic = 16;       // outstanding RDMA reads/atomics this QP initiates
  uint8_t max_dest_rd_atomic = 16;  // ... it accepts as responder
  uint8_t min_rnr_timer = 12;       // IB encoding: 12 = 0.64 ms
  uint8_t timeout = 14;             // local ACK timeout 4.096 µs · 2^14 ≈ 67 ms
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;  // 7 = retry forever
};

// RoCE (Ethernet link layer): addressed by GID, so every packet carries a GRH.
struct RocePath {
  GidBytes dgid{};
  uint8_t sgid_index = 0;
  uint8_t dscp = 26;  // DSCP of data packets; the traffic class carries it with ECT(0)
  bool ect = true;    // mark data ECN-capable so switches can mark instead of drop
  uint8_t hop_limit = 64;
  uint32_t flow_label = 0;
  uint8_t sl = 0;  // becomes the 802.1p priority on mlx5
};

// InfiniBand: addressed by LID within the subnet; a GRH only toward another subnet (through a
// router), where the LID is the router's and the GID names the peer.
struct IbPath {
  uint16_t dlid = 0;
  uint8_t sl = 0;
  uint8_t src_path_bits = 0;
  bool grh = false;
  GidBytes dgid{};
  uint8_t sgid_index = 0;
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
};

struct RcRemote {
  uint32_t qpn = 0;  // remote QP number
  uint32_t psn = 0;  // first PSN the remote will send (our receive PSN), 24 bits
  std::variant<RocePath, IbPath> path;
};

struct QpTransition {
  ibv_qp_attr attr{};
  int mask = 0;
};

// IP traffic class byte: DSCP in the upper six bits, ECT(0) (binary 10) in the ECN bits when `ect`.
constexpr uint8_t traffic_class(uint8_t dscp, bool ect) {
  return static_cast<uint8_t>(((dscp & 0x3f) << 2) | (ect ? 0x2 : 0x0));
}

// RESET → INIT: port, P_Key index, remote access rights.
QpTransition rc_init(const RcQpConfig& cfg);
// INIT → RTR: path MTU, remote QPN, receive PSN, responder resources, RNR timer and the address vector.
QpTransition rc_rtr(const RcQpConfig& cfg, const RcRemote& remote);
// RTR → RTS: our send PSN, ACK timeout, retry counts, initiator depth.
QpTransition rc_rts(const RcQpConfig& cfg, uint32_t sq_psn);

}  // namespace rdmad::verbs::rdma_core
