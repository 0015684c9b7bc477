// Reliable delivery, as the soft RoCEv2 backend does it (verbs/engine/src/requester.cc and
// responder.cc): the receiver takes packets in PSN order only, ACKs when a packet asks for one
// (coalescing ACKs that have not left yet), answers a duplicate with a repeat of its last ACK and a
// gap with one sequence NAK; the sender rewinds to the NAK's PSN, or to its first unacknowledged PSN
// when nothing was acknowledged for a retransmit timeout (go-back-N). Also the wire losses of
// [loss]. A flow is done when its last byte is acknowledged.
#include <algorithm>

#include "network.h"

namespace rdmad::sim {
namespace {

// As the soft requester (kAckReqEvery, requester.cc): a data packet asks for an ACK when it is the
// last of its message, every 32nd packet, or when neither an ACK nor a request for one came for an
// eighth of the timeout (so a flow paced far below line rate still feeds its timer). Unlike there,
// the last rule holds with nothing outstanding too: DCQCN's 1 Mb/s floor spaces packets 8.5 ms
// apart, past the simulator's 1 ms timeout (the soft QP timeouts are far longer), and a lone packet
// that asked for no ACK would always end in a timeout.
constexpr uint32_t kAckReqEvery = 32;
constexpr SimTimeNs kAckReqIntervalDivisor = 8;
// An ACK or NAK is the RoCEv2 headers plus the 4-byte AETH.
constexpr uint32_t kAethBytes = 4;

}  // namespace

// The drop list is short (hand-placed losses), so a scan per arrival costs little.
bool Network::lost_on_link(const Packet& pkt) {
  if (!pending_drops_.empty() && (pkt.type == PacketType::kData || pkt.type == PacketType::kAck)) {
    const LossKind kind = pkt.type == PacketType::kData ? LossKind::kData : LossKind::kAck;
    for (auto it = pending_drops_.begin(); it != pending_drops_.end(); ++it) {
      if (it->flow == pkt.flow && it->psn == pkt.psn && it->kind == kind) {
        pending_drops_.erase(it);
        return true;
      }
    }
  }
  return s_.loss.rate > 0 && loss_rng_.uniform() < s_.loss.rate;
}

// Called as a data packet of `flow` leaves (before sent_bytes moves past it).
void Network::on_data_sent(uint32_t flow, Packet& pkt) {
  Flow& f = flows_[flow];
  const uint32_t psn = psn_of(f);
  pkt.psn = psn;
  if (psn < f.max_psn) {
    ++retx_packets_;
    retx_bytes_ += pkt.payload_bytes;
  }
  const bool outstanding = f.una_psn != f.max_psn;
  const bool last = f.size_bytes != 0 && f.sent_bytes + pkt.payload_bytes >= f.size_bytes;
  const bool ack_due =
      now_ - std::max(f.last_ack_req_ns, f.last_progress_ns) >= retx_timeout_ns_ / kAckReqIntervalDivisor;
  pkt.ack_req = last || psn % kAckReqEvery == kAckReqEvery - 1 || ack_due;
  if (pkt.ack_req) f.last_ack_req_ns = now_;
  if (!outstanding) {  // the timer starts with the first packet
    f.last_progress_ns = now_;
    f.retx_timer_at = now_ + retx_timeout_ns_;
    events_.push(f.retx_timer_at, EventKind::kRetxTimer, flow);
  }
  f.max_psn = std::max(f.max_psn, psn + 1);
}

// The receiver's PSN check (responder.cc, on_request): true when the packet is the next in order.
bool Network::receive_data(const Packet& pkt) {
  Flow& f = flows_[pkt.flow];
  if (pkt.psn == f.expected_psn) {
    ++f.expected_psn;
    f.nak_sent = false;
    if (pkt.ack_req) send_ack(pkt.flow, PacketType::kAck, pkt.psn);
    return true;
  }
  if (pkt.psn < f.expected_psn) {  // a duplicate: re-ACK everything up to expected - 1
    ++duplicates_;
    send_ack(pkt.flow, PacketType::kAck, f.expected_psn - 1);
    return false;
  }
  ++out_of_order_;  // past a gap: dropped, and the gap NAKed once
  if (!f.nak_sent) {
    f.nak_sent = true;
    send_ack(pkt.flow, PacketType::kNak, f.expected_psn);
  }
  return false;
}

// An ACK still waiting in the receiver's NIC takes the newer PSN instead of a second ACK being
// queued (responder.cc, ack_coalesced); a NAK ends the coalescing, as it does there.
void Network::send_ack(uint32_t flow, PacketType type, uint32_t psn) {
  Flow& f = flows_[flow];
  if (type == PacketType::kAck && f.pending_ack != kNone) {
    packets_[f.pending_ack].psn = psn;
    return;
  }
  const uint32_t pkt_id = new_packet(flow, type, s_.header_bytes + kAethBytes, 0, psn);
  if (type == PacketType::kAck) {
    f.pending_ack = pkt_id;
    ++acks_sent_;
  } else {
    f.pending_ack = kNone;
    ++naks_sent_;
  }
  queue_control(f.dst, pkt_id);
}

void Network::on_ack_sent(uint32_t pkt_id) {
  Flow& f = flows_[packets_[pkt_id].flow];
  if (f.pending_ack == pkt_id) f.pending_ack = kNone;
}

// ACKs and NAKs are believed only for PSNs outstanding (requester.cc): an ACK names the last PSN it
// covers, a sequence NAK the PSN expected, and acknowledges everything before it (IB 9.7.5.1).
void Network::receive_ack(const Packet& pkt) {
  Flow& f = flows_[pkt.flow];
  if (f.finish_ns >= 0 || pkt.psn >= f.max_psn) return;
  if (pkt.type == PacketType::kAck) {
    acknowledge(pkt.flow, pkt.psn + 1);
    return;
  }
  if (pkt.psn < f.una_psn) return;
  acknowledge(pkt.flow, pkt.psn);
  if (f.finish_ns < 0) go_back_n(pkt.flow, pkt.psn);
}

void Network::acknowledge(uint32_t flow, uint32_t next_psn) {
  Flow& f = flows_[flow];
  if (next_psn <= f.una_psn) return;
  f.una_psn = next_psn;
  f.last_progress_ns = now_;
  if (f.gbn_active && next_psn > f.gbn_psn) f.gbn_active = false;
  // Nothing acknowledged is sent again: a rewind overtaken by a later ACK resumes after it.
  f.sent_bytes = std::max(f.sent_bytes, uint64_t{next_psn} * s_.mtu_bytes);
  if (f.size_bytes != 0 && f.sent_bytes >= f.size_bytes) f.sent_bytes = f.size_bytes;
  if (f.una_psn == f.max_psn) f.retx_timer_at = kNoTime;  // nothing outstanding: the timer stops
  if (f.size_bytes != 0 && uint64_t{f.una_psn} * s_.mtu_bytes >= f.size_bytes) {
    f.sending = false;
    finish_flow(f);
  }
}

// A repeated NAK for the PSN already rewound to changes nothing (requester.cc, go_back_n).
void Network::go_back_n(uint32_t flow, uint32_t psn) {
  Flow& f = flows_[flow];
  if (f.gbn_active && f.gbn_psn == psn) return;
  f.gbn_active = true;
  f.gbn_psn = psn;
  ++rewinds_;
  f.sent_bytes = uint64_t{psn} * s_.mtu_bytes;
  if (f.sending) return;  // already queued or paced: its next packet is the rewound one
  f.sending = true;
  f.next_send_ns = std::max(f.next_send_ns, static_cast<double>(now_));
  host_ready_[f.src].push(flow);
  host_start_tx(node_first_port_[f.src]);
}

// The timer runs while packets are outstanding; ACKs only move last_progress_ns, and the timer,
// when it fires early, re-arms at the deadline that moved (requester.cc, retransmit_timer).
// Retries are unlimited: a simulated flow never gives up.
void Network::retransmit_timer(uint32_t flow) {
  Flow& f = flows_[flow];
  f.retx_timer_at = kNoTime;
  if (f.finish_ns >= 0 || f.una_psn == f.max_psn) return;
  f.retx_timer_at = f.last_progress_ns + retx_timeout_ns_;
  if (now_ >= f.retx_timer_at) {
    ++timeouts_;
    f.gbn_active = false;
    go_back_n(flow, f.una_psn);
    f.last_progress_ns = now_;
    f.retx_timer_at = now_ + retx_timeout_ns_;
  }
  events_.push(f.retx_timer_at, EventKind::kRetxTimer, flow);
}

void Network::finish_flow(Flow& f) {
  if (f.finish_ns >= 0) return;
  f.finish_ns = now_;
  ++flows_done_;
}

}  // namespace rdmad::sim
