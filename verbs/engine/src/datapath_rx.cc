// Receive burst: decode each datagram (ICRC checked against the addresses it travelled with and
// whatever IPv4 id the sender used), drop what no QP of ours should take (unknown QP, QP not
// connected, not from the QP's peer), read its ECN bits, and hand it to the requester, the
// responder or the congestion-control hooks. Every drop is counted by reason
// (NicCounters::rx_dropped_by_reason), never logged: a stranger's flood must cost a counter
// increment per packet, not a line.
#include "datapath.h"

namespace rdmad::verbs::engine {
namespace {

RxDropReason drop_reason(roce::DecodeError e) {
  switch (e) {
    case roce::DecodeError::kTruncatedBth:
    case roce::DecodeError::kTruncatedExtHeader: return RxDropReason::kTruncated;
    case roce::DecodeError::kIcrcMismatch: return RxDropReason::kBadIcrc;
    default: return RxDropReason::kMalformed;
  }
}

}  // namespace

bool Datapath::rx_burst(TimeNs now) {
  // Bursts of kRxBurst until the queue has no more at hand, at most kRxPassPackets a pass (what one
  // recvmmsg of coalesced runs may bring in), then the pass transmits and runs its timers.
  bool any = false;
  for (size_t total = 0; total < kRxPassPackets;) {
    RxStats stats;
    const size_t n = queue_.receive(rx_, &stats);
    drop(RxDropReason::kTruncated, stats.truncated);
    any |= n > 0 || stats.truncated > 0 || stats.not_roce > 0;
    for (size_t i = 0; i < n; ++i) {
      roce::Packet pkt;
      const RxPacket& in = rx_[i];
      if (const roce::DecodeError e = roce::decode_datagram(in.data, &in.ip, &pkt, &decode_counters_);
          e != roce::DecodeError::kOk) {
        drop(drop_reason(e));
        continue;
      }
      ++counters_.rx_packets;
      counters_.rx_bytes += in.data.size();
      on_packet(pkt, in.ip, now);
    }
    total += n;
    if (n < rx_.size()) break;
  }
  return any;
}

void Datapath::on_packet(const roce::Packet& pkt, const roce::IpUdpInfo& ip, TimeNs now) {
  QpContext* qp = qp_by_num(pkt.bth.dest_qp);
  if (qp == nullptr) return drop(RxDropReason::kUnknownQp);
  // Only a connected QP has a peer to compare with; the others take nothing (IB: a QP in RESET or
  // INIT silently drops, one in ERR only flushes).
  if (qp->state != QpState::kRtr && qp->state != QpState::kRts) return drop(RxDropReason::kBadState);
  if (!from_peer(*qp, ip)) return drop(RxDropReason::kWrongSource);
  if (pkt.bth.opcode == roce::Opcode::kCnp) {
    if (!cc_enabled_) {
      ++counters_.rp_cnp_ignored;
      return;
    }
    ++counters_.rp_cnp_handled;
    on_cnp(*qp, now);
    return;
  }
  activate(*qp);  // an ACK may open the window or complete WRs, a request queues a response
  if ((ip.tos & roce::kEcnMask) == roce::kEcnCe && pkt.bth.opcode != roce::Opcode::kAcknowledge) {
    ++counters_.np_ecn_marked_roce_packets;
    if (cc_enabled_) on_ce_marked(*qp, now);
  }
  switch (pkt.bth.opcode) {
    case roce::Opcode::kAcknowledge: on_ack(*qp, pkt, now); break;
    case roce::Opcode::kReadResponseFirst:
    case roce::Opcode::kReadResponseMiddle:
    case roce::Opcode::kReadResponseLast:
    case roce::Opcode::kReadResponseOnly: on_read_response(*qp, pkt, now); break;
    default: on_request(*qp, pkt, now); break;
  }
}

}  // namespace rdmad::verbs::engine
