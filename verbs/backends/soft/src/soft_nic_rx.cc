// Receive burst: decode each datagram (ICRC checked against the addresses it travelled with), read
// its ECN bits, and hand it to the requester, the responder or the congestion-control hooks.
#include "soft_nic.h"

namespace rdmad::verbs::soft {

bool SoftNic::rx_burst(TimeNs now) {
  size_t n = rx_.receive(fd_);
  counters_.rx_dropped += rx_.truncated();
  for (size_t i = 0; i < n; ++i) {
    roce::IpUdpInfo ip;
    from_sockaddr(rx_.source(i), &ip.src, &ip.src_port);
    ip.dst = local_ip_;
    ip.dst_port = local_port_;
    ip.tos = rx_.tos(i);
    roce::Packet pkt;
    auto data = rx_.packet(i);
    if (roce::decode_datagram(data, config_.verify_icrc ? &ip : nullptr, &pkt, &decode_counters_) !=
        roce::DecodeError::kOk) {
      ++counters_.rx_dropped;
      continue;
    }
    ++counters_.rx_packets;
    counters_.rx_bytes += data.size();
    on_packet(pkt, rx_.tos(i), now);
  }
  return n > 0 || rx_.truncated() > 0;
}

void SoftNic::on_packet(const roce::Packet& pkt, uint8_t tos, TimeNs now) {
  QpContext* qp = qp_by_num(pkt.bth.dest_qp);
  if (pkt.bth.opcode == roce::Opcode::kCnp) {
    if (qp == nullptr || !config_.cc_enabled) {
      ++counters_.rp_cnp_ignored;
      return;
    }
    ++counters_.rp_cnp_handled;
    on_cnp(*qp, now);
    return;
  }
  if (qp == nullptr) {
    ++counters_.rx_dropped;
    return;
  }
  if ((tos & roce::kEcnMask) == roce::kEcnCe && pkt.bth.opcode != roce::Opcode::kAcknowledge) {
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
