#pragma once
// Brings up RC queue pairs between this node's NICs and a peer's through the transport interface
// (soft backend now; rdma_core runs the same code): create QPs in RESET, take them to INIT, hand
// out their endpoints, and take them to RTR and RTS with the peer's endpoints. Local NIC i pairs
// with the peer's NIC i (rails), QP j of the pair with QP j.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rdmad/daemon/peer/wire.h"
#include "rdmad/verbs/device.h"

namespace rdmad::peer {

/// A local NIC and the objects its QPs use; the caller owns them and keeps them alive longer
/// than the connector.
struct LocalNic {
  std::string name;
  verbs::Device* device = nullptr;  // nullptr while the NIC is out of service (it gets no QPs)
  verbs::ProtectionDomain* pd = nullptr;
  verbs::CompletionQueue* send_cq = nullptr;
  verbs::CompletionQueue* recv_cq = nullptr;
  uint8_t port = 1;
  // When set, the endpoints of this NIC carry this GID / UDP port instead of the port's, so
  // the peer addresses a fabric emulator (or another relay) in front of this NIC.
  std::optional<verbs::Gid> advertise_gid;
  uint16_t advertise_udp_port = 0;  // 0: the device's own
};

/// The most QPs per NIC pair ([flow] qps_per_lane).
inline constexpr uint32_t kMaxQpsPerNic = 16;

struct QpConnectorOptions {
  // QPs per NIC, 1..kMaxQpsPerNic (NICs x qps_per_nic at most kMaxEndpoints). The peer's may be
  // fewer: QP j pairs only with the peer's QP j, so each NIC pair ends up with the smaller number.
  uint32_t qps_per_nic = 1;
  uint32_t max_send_wr = 256;
  uint32_t max_recv_wr = 256;
  uint32_t access = verbs::kAccessRemoteWrite | verbs::kAccessRemoteRead;  // what the peer may do
  uint32_t max_mtu_bytes = 4096;
  uint8_t timeout = 14;  // local ACK timeout 4.096 µs · 2^timeout
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 12;
  uint8_t max_rd_atomic = 16;
};

class QpConnector {
 public:
  struct Qp {
    uint16_t nic_index = 0;
    uint16_t qp_index = 0;
    std::unique_ptr<verbs::QueuePair> qp;
    NicEndpoint local;
    NicEndpoint remote;  // set once connected
    bool connected = false;
  };

  QpConnector(std::vector<LocalNic> nics, QpConnectorOptions options);

  /// Creates qps_per_nic QPs per NIC in INIT (with random initial PSNs) and returns their
  /// endpoints for the peer. Replaces QPs from an earlier call. A NIC out of service or whose port
  /// is not ACTIVE gets none (left_out() says which and why); prepare_nic() adds them later.
  verbs::Result<std::vector<NicEndpoint>> prepare();
  /// The NICs the last prepare() left out, each as "nic NAME: reason".
  const std::vector<std::string>& left_out() const { return left_out_; }
  /// Takes every local QP that has a matching remote endpoint (same NIC and QP index) to RTR and
  /// RTS; QPs without one are destroyed. An error names the NIC and the transition.
  verbs::Status connect(std::span<const NicEndpoint> remote);
  /// Failover recovery: destroys the QPs of one NIC only and creates qps_per_nic fresh ones in
  /// INIT (new random PSNs, the port's GID and LID now); returns their endpoints. The other NICs'
  /// QPs are untouched (their QueuePair pointers stay valid). An error names the NIC and the step
  /// (or why the NIC cannot have QPs now: out of service, port not ACTIVE).
  verbs::Result<std::vector<NicEndpoint>> prepare_nic(uint16_t nic_index);
  /// Replaces a NIC's objects (device, PD, CQs): a NIC that came into service after the session
  /// started. Its QPs, if any, are destroyed; prepare_nic() makes fresh ones.
  void set_nic(uint16_t nic_index, const LocalNic& nic);
  /// Takes the not yet connected QPs of one NIC to RTR and RTS against the remote endpoints of
  /// that NIC (others in `remote` are ignored); those without a partner are destroyed.
  verbs::Status connect_nic(uint16_t nic_index, std::span<const NicEndpoint> remote);
  /// Destroys every QP.
  void reset() { qps_.clear(); }

  const std::vector<Qp>& qps() const { return qps_; }
  /// The connected QP of (nic, qp index), or nullptr.
  verbs::QueuePair* qp(uint16_t nic_index, uint16_t qp_index) const;
  /// The connected QPs of one NIC in QP index order (the lane's QPs; empty: none).
  std::vector<verbs::QueuePair*> nic_qps(uint16_t nic_index) const;
  const std::vector<LocalNic>& nics() const { return nics_; }

 private:
  // Appends qps_per_nic fresh QPs of NIC n in INIT to qps_ and their endpoints to out.
  verbs::Status add_nic_qps(uint16_t n, std::vector<NicEndpoint>& out);
  // Why NIC n cannot have QPs now; empty when it can.
  std::string not_usable(uint16_t n) const;
  verbs::Status connect_qp(Qp& q, const NicEndpoint& remote);
  // Connects the unconnected QPs (of one NIC, or all when nic < 0) that have a partner in
  // `remote` and destroys the others of that set; returns how many are connected.
  verbs::Result<size_t> connect_where(std::span<const NicEndpoint> remote, int nic);

  std::vector<LocalNic> nics_;
  QpConnectorOptions options_;
  std::vector<Qp> qps_;
  std::vector<std::string> left_out_;
};

}  // namespace rdmad::peer
