// Output-queued switch: a shared buffer with dynamic thresholds (Choudhury & Hahne), per-ingress
// PFC accounting with headroom, strict priority for CNPs, and RED/ECN marking at dequeue (cc/).
#include <algorithm>

#include "network.h"

namespace rdmad::sim {

void Network::switch_receive(uint32_t in_port, uint32_t pkt_id) {
  Packet& pkt = packets_[pkt_id];
  const Flow& f = flows_[pkt.flow];
  const uint32_t node = ports_[in_port].node;
  SwitchState& sw = switches_[node - topo_.hosts];
  const bool data = pkt.type == PacketType::kData;
  const uint32_t out = next_port(node, f, data ? f.dst : f.src);
  Port& in = ports_[in_port];
  Port& eg = ports_[out];
  const uint64_t bytes = pkt.wire_bytes;
  const uint64_t shared_free = sw.shared_size - sw.shared_used;
  pkt.ingress_port = in_port;
  pkt.in_headroom = false;

  if (!data) {
    // CNPs are tiny and strictly prioritised: admitted while any shared buffer is left.
    if (bytes > shared_free) {
      ++drops_;
      free_packet(pkt_id);
      return;
    }
    sw.shared_used += bytes;
  } else if (in.pfc_xoff != 0) {
    // Static thresholds (htsim's LosslessInputQueue, a switch's per-port Xoff): the ingress holds
    // shared buffer up to Xoff, what is above it is headroom, and crossing Xoff pauses upstream.
    const uint64_t held = in.ingress_shared_bytes + in.headroom_used_bytes;
    uint64_t shared = held >= in.pfc_xoff ? 0 : std::min(bytes, in.pfc_xoff - held);
    if (shared > shared_free) shared = 0;
    if (in.headroom_used_bytes + bytes - shared > in.headroom_bytes) {
      ++drops_;
      free_packet(pkt_id);
      return;
    }
    in.ingress_shared_bytes += shared;
    sw.shared_used += shared;
    in.headroom_used_bytes += bytes - shared;
    if (shared < bytes && !in.xoff_sent) send_pause(in_port, true);
  } else if (s_.sw.pfc) {
    // Lossless: an ingress over its Xoff threshold spills into its headroom and pauses upstream.
    if (static_cast<double>(in.ingress_shared_bytes + bytes) <= xoff_threshold(shared_free) &&
        bytes <= shared_free) {
      in.ingress_shared_bytes += bytes;
      sw.shared_used += bytes;
    } else if (in.headroom_used_bytes + bytes <= in.headroom_bytes) {
      in.headroom_used_bytes += bytes;
      pkt.in_headroom = true;
      if (!in.xoff_sent) send_pause(in_port, true);
    } else {
      ++drops_;
      free_packet(pkt_id);
      return;
    }
  } else {
    // Lossy: the egress queue may hold at most dt_alpha·(free shared buffer).
    if (static_cast<double>(eg.queue_bytes[kDataPrio] + bytes) >
        s_.sw.dt_alpha * static_cast<double>(shared_free)) {
      ++drops_;
      free_packet(pkt_id);
      return;
    }
    in.ingress_shared_bytes += bytes;
    sw.shared_used += bytes;
  }
  const int prio = data ? kDataPrio : kCtrlPrio;
  eg.queue[prio].push(pkt_id);
  eg.queue_bytes[prio] += bytes;
  if (eg.bottleneck && now_ >= warmup_ns_) {
    eg.max_queue_bytes = std::max(eg.max_queue_bytes, eg.queue_bytes[0] + eg.queue_bytes[1]);
  }
  switch_start_tx(out);
}

void Network::switch_start_tx(uint32_t port) {
  Port& p = ports_[port];
  if (p.busy_until > now_) {
    wake_after_tx(port);
    return;
  }
  int prio;
  if (!p.queue[kCtrlPrio].empty()) {
    prio = kCtrlPrio;
  } else if (!p.queue[kDataPrio].empty() && !p.paused) {
    prio = kDataPrio;
  } else {
    return;
  }
  uint32_t pkt_id = p.queue[prio].pop();
  Packet& pkt = packets_[pkt_id];
  // Marking at dequeue sees the queue the packet actually waited behind, so the signal is as fresh
  // as possible (DCQCN paper §3; HPCC's simulator also marks at dequeue).
  if (prio == kDataPrio && p.marker && p.marker->should_mark(p.queue_bytes[prio])) {
    if (!pkt.ce) ++ecn_marks_;
    pkt.ce = true;
  }
  p.queue_bytes[prio] -= pkt.wire_bytes;
  release_ingress(pkt, p.node);
  transmit(port, pkt_id);
  if (!p.queue[kCtrlPrio].empty() || !p.queue[kDataPrio].empty()) wake_after_tx(port);
}

void Network::release_ingress(const Packet& pkt, uint32_t node) {
  SwitchState& sw = switches_[node - topo_.hosts];
  Port& in = ports_[pkt.ingress_port];
  if (in.pfc_xoff != 0) {
    if (pkt.type != PacketType::kData) return void(sw.shared_used -= pkt.wire_bytes);
    // Static thresholds: the headroom is the top of what the ingress holds, so it empties first.
    const uint64_t from_headroom = std::min<uint64_t>(pkt.wire_bytes, in.headroom_used_bytes);
    in.headroom_used_bytes -= from_headroom;
    in.ingress_shared_bytes -= pkt.wire_bytes - from_headroom;
    sw.shared_used -= pkt.wire_bytes - from_headroom;
    if (in.xoff_sent && in.ingress_shared_bytes + in.headroom_used_bytes <= in.pfc_xon) {
      send_pause(pkt.ingress_port, false);
    }
    return;
  }
  if (pkt.in_headroom) {
    in.headroom_used_bytes -= pkt.wire_bytes;
  } else {
    sw.shared_used -= pkt.wire_bytes;
    if (pkt.type == PacketType::kData) in.ingress_shared_bytes -= pkt.wire_bytes;
  }
  if (in.xoff_sent && in.headroom_used_bytes == 0) {
    const uint64_t xon_offset =
        s_.sw.xon_offset_bytes != 0 ? s_.sw.xon_offset_bytes : 2 * (s_.mtu_bytes + s_.header_bytes);
    if (static_cast<double>(in.ingress_shared_bytes + xon_offset) <=
        xoff_threshold(sw.shared_size - sw.shared_used)) {
      send_pause(pkt.ingress_port, false);
    }
  }
}

// Bytes of shared buffer an ingress may hold before Xoff under the dynamic threshold: pfc_alpha of
// the free shared buffer.
double Network::xoff_threshold(uint64_t shared_free) const {
  return s_.sw.pfc_alpha * static_cast<double>(shared_free);
}

// PAUSE/RESUME for the data priority reaches the upstream port one propagation delay later; the
// frame's own serialisation (64 bytes) is neglected.
void Network::send_pause(uint32_t in_port, bool pause) {
  Port& in = ports_[in_port];
  in.xoff_sent = pause;
  if (pause) ++pfc_pauses_;
  events_.push(now_ + in.delay_ns, EventKind::kPause, in.peer, pause ? 1 : 0);
}

}  // namespace rdmad::sim
