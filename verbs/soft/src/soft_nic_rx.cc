// Receive burst: decode each datagram (ICRC checked against the addresses it travelled with and
// whatever IPv4 id the sender used), drop what no QP of ours should take (unknown QP, QP not
// connected, not from the QP's peer), read its ECN bits, and hand it to the requester, the
// responder or the congestion-control hooks. Every drop is counted by reason
// (NicCounters::rx_dropped_by_reason), never logged: a stranger's flood must cost a counter
// increment per packet, not a line.
#include "soft_nic.h"

namespace rdmad::verbs::soft {
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

bool SoftNic::rx_burst(TimeNs now) {
  size_t n = rx_.receive(fd_);
  drop(RxDropReason::kTruncated, rx_.truncated());
  for (size_t i = 0; i < n; ++i) {
    roce::IpUdpInfo ip;
    from_sockaddr(rx_.source(i), &ip.src, &ip.src_port);
    ip.dst = local_ip_;
    ip.dst_port = local_port_;
    ip.tos = rx_.tos(i);
    // The socket does not show the IPv4 id. Soft senders leave it 0; rxe and hardware NICs send
    // real ids, which their ICRC covers: the check takes the id that makes it match.
    ip.ip_id_known = false;
    roce::Packet pkt;
    auto data = rx_.packet(i);
    if (const roce::DecodeError e = roce::decode_datagram(data, &ip, &pkt, &decode_counters_);
        e != roce::DecodeError::kOk) {
      drop(drop_reason(e));
      continue;
    }
    ++counters_.rx_packets;
    counters_.rx_bytes += data.size();
    on_packet(pkt, ip, now);
  }
  return n > 0 || rx_.truncated() > 0;
}

void SoftNic::on_packet(const roce::Packet& pkt, const roce::IpUdpInfo& ip, TimeNs now) {
  QpContext* qp = qp_by_num(pkt.bth.dest_qp);
  if (qp == nullptr) return drop(RxDropReason::kUnknownQp);
  // Only a connected QP has a peer to compare with; the others take nothing (IB: a QP in RESET or
  // INIT silently drops, one in ERR only flushes).
  if (qp->state != QpState::kRtr && qp->state != QpState::kRts) return drop(RxDropReason::kBadState);
  if (!from_peer(*qp, ip)) return drop(RxDropReason::kWrongSource);
  if (pkt.bth.opcode == roce::Opcode::kCnp) {
    if (!config_.cc_enabled) {
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
    if (config_.cc_enabled) on_ce_marked(*qp, now);
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

}  // namespace rdmad::verbs::soft
