#pragma once
// Plain value types of the transport interface. They mirror ibverbs (struct ibv_send_wr, ibv_wc,
// ibv_qp_attr, ...) closely enough that the rdma_core backend maps them field by field.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rdmad::verbs {

/// A 128-bit GID. RoCEv2 GIDs are IP addresses; IPv4 uses the IPv4-mapped form ::ffff:a.b.c.d.
struct Gid {
  std::array<uint8_t, 16> raw{};

  /// Parses "a.b.c.d" (stored IPv4-mapped) or an IPv6 literal; nullopt if neither.
  static std::optional<Gid> from_ip(std::string_view ip);
  /// True for ::ffff:a.b.c.d.
  bool is_ipv4_mapped() const;
  /// "a.b.c.d" for IPv4-mapped GIDs, the IPv6 literal otherwise.
  std::string to_ip_string() const;
  bool operator==(const Gid&) const = default;
};

enum class LinkLayer : uint8_t { kEthernet, kInfiniband };
enum class PortState : uint8_t { kDown, kInit, kActive };

struct PortInfo {
  uint8_t port_num = 1;
  PortState state = PortState::kDown;
  LinkLayer link_layer = LinkLayer::kEthernet;
  uint32_t speed_mbps = 0;      // link speed (the configured line rate for soft NICs)
  uint32_t max_mtu_bytes = 4096;
  uint32_t active_mtu_bytes = 4096;
  Gid gid;                      // GID index 0: the RoCEv2 address
  uint16_t udp_port = 4791;     // RoCEv2 UDP port this NIC listens on
  uint16_t lid = 0;             // InfiniBand: this port's LID (what a peer puts in dest_lid)
};

/// Memory access flags (ibv_access_flags subset).
enum Access : uint32_t {
  kAccessLocalWrite = 1u << 0,
  kAccessRemoteWrite = 1u << 1,
  kAccessRemoteRead = 1u << 2,
};

enum class QpState : uint8_t { kReset, kInit, kRtr, kRts, kError };

/// Which QpAttr fields a modify applies (ibv_qp_attr_mask subset).
enum QpAttrMask : uint32_t {
  kQpState = 1u << 0,
  kQpAccessFlags = 1u << 1,
  kQpPathMtu = 1u << 2,
  kQpDestQpn = 1u << 3,
  kQpRqPsn = 1u << 4,
  kQpSqPsn = 1u << 5,
  kQpTimeout = 1u << 6,
  kQpRetryCnt = 1u << 7,
  kQpRnrRetry = 1u << 8,
  kQpMinRnrTimer = 1u << 9,
  kQpMaxRdAtomic = 1u << 10,
  kQpMaxDestRdAtomic = 1u << 11,
  kQpAv = 1u << 12,  // dest_gid + dest_udp_port
};

/// What a queue pair's queues really hold (ibv_qp_cap): at least what QpInitAttr asked for. A
/// device may give more (rxe makes 256 into 511, soft rounds up to a power of two); post_send and
/// post_recv take this many outstanding work requests before they return kNoResource.
struct QpCap {
  uint32_t max_send_wr = 0;
  uint32_t max_recv_wr = 0;
};

/// Queue-pair attributes (ibv_qp_attr subset). Transitions require the same masks as ibverbs:
/// RESET→INIT: state|access_flags; INIT→RTR: state|path_mtu|dest_qpn|rq_psn|av|max_dest_rd_atomic|
/// min_rnr_timer; RTR→RTS: state|sq_psn|timeout|retry_cnt|rnr_retry|max_rd_atomic.
struct QpAttr {
  QpState state = QpState::kReset;
  QpCap cap;                     // query() only (modify ignores it): the queues' real depths
  uint32_t access_flags = 0;     // remote access the responder grants (Access bits)
  uint32_t path_mtu_bytes = 1024;  // 256, 512, 1024, 2048 or 4096
  uint32_t dest_qp_num = 0;
  uint32_t rq_psn = 0;           // 24 bits
  uint32_t sq_psn = 0;           // 24 bits
  uint8_t timeout = 14;          // local ACK timeout 4.096 µs · 2^timeout; 0 = infinite
  uint8_t retry_cnt = 7;         // 0..7 retransmissions after a timeout or sequence NAK
  uint8_t rnr_retry = 7;         // 0..7, 7 = retry forever
  uint8_t min_rnr_timer = 12;    // IB RNR timer code the responder advertises (12 = 0.64 ms)
  uint8_t max_rd_atomic = 16;    // outstanding READs as requester
  uint8_t max_dest_rd_atomic = 16;  // outstanding READs as responder
  Gid dest_gid;                  // peer address (or the address of a fabric emulator port)
  uint16_t dest_udp_port = 4791;
  uint16_t dest_lid = 0;         // InfiniBand ports: the peer port's LID (RoCE routes by dest_gid)
};

struct QpInitAttr {
  uint32_t max_send_wr = 256;
  uint32_t max_recv_wr = 256;
  class CompletionQueue* send_cq = nullptr;
  class CompletionQueue* recv_cq = nullptr;
};

/// One scatter/gather element of registered memory.
struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

enum class WrOpcode : uint8_t { kSend, kSendWithImm, kRdmaWrite, kRdmaWriteWithImm, kRdmaRead };

/// A send work request (one SGE; ibverbs' sg_list of length 0 or 1).
struct SendWr {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  Sge sge;
  uint64_t remote_addr = 0;  // WRITE/READ
  uint32_t rkey = 0;         // WRITE/READ
  uint32_t imm_data = 0;     // *_WITH_IMM, host order
  bool signaled = true;      // generate a completion on success (errors always complete)
};

struct RecvWr {
  uint64_t wr_id = 0;
  Sge sge;
};

enum class WcStatus : uint8_t {
  kSuccess,
  kLocalLengthError,
  kLocalProtectionError,
  kRemoteAccessError,
  kRemoteInvalidRequest,
  kRemoteOperationalError,
  kRetryExceeded,
  kRnrRetryExceeded,
  kWrFlushed,
  kLocalQpOperationError,  // IB's "local QP operation error"; rxe gives it for a bad lkey (docs/verbs.md)
  kGeneralError,
};

enum class WcOpcode : uint8_t { kSend, kRdmaWrite, kRdmaRead, kRecv, kRecvRdmaWithImm };

struct WorkCompletion {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  bool has_imm = false;
  uint32_t qp_num = 0;
  uint32_t byte_len = 0;  // receives: bytes placed
  uint32_t imm_data = 0;  // host order
};

std::string_view to_string(WcStatus status);
std::string_view to_string(QpState state);

}  // namespace rdmad::verbs
