// Hosts: one NIC port each. The NIC sends CNPs first, then round-robins over the QPs whose pacing
// time has come; each QP is paced at the rate its cc/ reaction point gives. The receiving NIC runs the
// cc/ notification point per QP.
#include <algorithm>
#include <cmath>

#include "network.h"

namespace rdmad::sim {

double Network::flow_rate_mbps(const Flow& f) const {
  const double line = host_line_mbps_[f.src];
  return s_.cc_enabled ? std::min(line, static_cast<double>(rp(f).rate_mbps(f.rp))) : line;
}

void Network::flow_start(uint32_t id, uint32_t chain) {
  Flow& f = flows_[id];
  if (chain != kNone && chain + 1 < chain_size()) {
    const uint32_t next = chain_at(chain + 1);
    events_.push(flows_[next].start_ns, EventKind::kFlowStart, next, chain + 1);
  }
  if (s_.cc_enabled) rp(f).start(f.rp, now_);
  f.sending = true;
  f.next_send_ns = static_cast<double>(now_);
  host_ready_[f.src].push(id);
  host_start_tx(node_first_port_[f.src]);
}

void Network::host_start_tx(uint32_t port) {
  Port& p = ports_[port];
  RingQueue& ready = host_ready_[p.node];
  if (p.busy_until > now_) {
    wake_after_tx(port);
    return;
  }
  if (!p.queue[kCtrlPrio].empty()) {
    uint32_t pkt = p.queue[kCtrlPrio].pop();
    p.queue_bytes[kCtrlPrio] -= packets_[pkt].wire_bytes;
    if (packets_[pkt].type == PacketType::kAck) on_ack_sent(pkt);
    transmit(port, pkt);
    if (!p.queue[kCtrlPrio].empty() || !ready.empty()) wake_after_tx(port);
    return;
  }
  if (p.paused) return;
  // A flow whose last byte was acknowledged while it waited here (after a rewind) has left.
  while (!ready.empty() && !flows_[ready.front()].sending) ready.pop();
  if (ready.empty()) return;
  const uint32_t id = ready.pop();
  Flow& f = flows_[id];
  uint64_t payload = s_.mtu_bytes;
  if (f.size_bytes != 0) payload = std::min<uint64_t>(payload, f.size_bytes - f.sent_bytes);
  const uint32_t pkt_id = new_packet(id, PacketType::kData, static_cast<uint32_t>(payload + s_.header_bytes),
                                     static_cast<uint32_t>(payload), 0);
  Packet& pkt = packets_[pkt_id];
  if (reliable_) on_data_sent(id, pkt);
  f.sent_bytes += payload;
  if (s_.cc_enabled) {
    rp(f).on_bytes_sent(f.rp, now_, payload);
    sync_rp_timer(id);
  }
  transmit(port, pkt_id);
  if (f.size_bytes != 0 && f.sent_bytes >= f.size_bytes) {
    f.sending = false;
    if (!p.queue[kCtrlPrio].empty() || !ready.empty()) wake_after_tx(port);
    return;
  }
  // Pacing: the next packet may leave one wire-time-at-rate after this one started.
  f.last_tx_ns = std::max(f.next_send_ns, static_cast<double>(now_));
  f.last_wire_bytes = pkt.wire_bytes;
  f.next_send_ns = f.last_tx_ns + static_cast<double>(pkt.wire_bytes) * 8000.0 / flow_rate_mbps(f);
  const auto port_free = now_ + static_cast<SimTimeNs>(std::ceil(pkt.wire_bytes * p.ns_per_byte));
  if (f.next_send_ns <= static_cast<double>(port_free)) {
    ready.push(id);
  } else {
    f.ready_at = static_cast<SimTimeNs>(std::ceil(f.next_send_ns));
    events_.push(f.ready_at, EventKind::kFlowReady, id);
  }
  if (!p.queue[kCtrlPrio].empty() || !ready.empty()) wake_after_tx(port);
}

// A rate limiter applies a raised rate to the packet it is holding back: a flow cut to a few Mb/s
// must not wait out the gap of its slowest rate once it recovers.
void Network::repace(uint32_t id) {
  Flow& f = flows_[id];
  if (f.ready_at == kNoTime) return;
  const double next = f.last_tx_ns + static_cast<double>(f.last_wire_bytes) * 8000.0 / flow_rate_mbps(f);
  const auto due = std::max(now_, static_cast<SimTimeNs>(std::ceil(next)));
  // Only a rise moves the wait: a cut (also run through here after a timer event) leaves the packet
  // held to the gap it was given, and must not push next_send_ns past ready_at, or the packet would
  // leave at ready_at but count as sent at that later time.
  if (due >= f.ready_at) return;
  f.next_send_ns = next;
  f.ready_at = due;
  events_.push(due, EventKind::kFlowReady, id);
}

void Network::host_receive(uint32_t pkt_id) {
  const Packet pkt = packets_[pkt_id];
  free_packet(pkt_id);
  Flow& f = flows_[pkt.flow];
  if (pkt.type == PacketType::kCnp) {
    if (s_.cc_enabled && f.sending) {
      rp(f).on_cnp(f.rp, now_);
      sync_rp_timer(pkt.flow);
    }
    return;
  }
  if (pkt.type != PacketType::kData) {
    receive_ack(pkt);
    return;
  }
  // Without ACKs every packet that arrives counts (a lossless fabric delivers in order).
  if (!reliable_ || receive_data(pkt)) {
    f.recv_bytes += pkt.payload_bytes;
    delivered_bytes_ += pkt.payload_bytes;
    credit_goodput(f, pkt.wire_bytes);
    // The last byte arrived (in order): flows waiting for it may start.
    if (!delivered_ns_.empty() && f.size_bytes != 0 && f.recv_bytes >= f.size_bytes &&
        f.recv_bytes - pkt.payload_bytes < f.size_bytes) {
      delivered(pkt.flow);
    }
  }
  // The NIC's notification point sees every CE-marked packet, in order or not.
  if (pkt.ce && s_.cc_enabled) {
    if (np_.on_ce_packet(f.np, now_)) send_cnp(pkt.flow);
    sync_np_timer(pkt.flow);
  }
  if (!reliable_ && f.size_bytes != 0 && f.recv_bytes >= f.size_bytes) finish_flow(f);
}

// A flow that waited for this one starts now (a collective's next phase at this rank).
void Network::delivered(uint32_t flow) {
  delivered_ns_[flow] = now_;
  if (dep_list_.empty()) return;
  for (uint32_t i = dep_offset_[flow]; i < dep_offset_[flow + 1]; ++i) {
    const uint32_t next = dep_list_[i];
    flows_[next].start_ns = now_;
    events_.push(now_, EventKind::kFlowStart, next, kNone);
  }
}

void Network::send_cnp(uint32_t flow) {
  const uint32_t pkt_id = new_packet(flow, PacketType::kCnp, s_.cnp_bytes, 0, 0);
  ++cnps_sent_;
  queue_control(flows_[flow].dst, pkt_id);
}

// CNPs, ACKs and NAKs leave the receiving host's NIC ahead of its data.
void Network::queue_control(uint32_t host, uint32_t pkt_id) {
  const uint32_t port = node_first_port_[host];
  ports_[port].queue[kCtrlPrio].push(pkt_id);
  ports_[port].queue_bytes[kCtrlPrio] += packets_[pkt_id].wire_bytes;
  host_start_tx(port);
}

// Only the earliest pending timer of each kind per flow sits in the event queue; an earlier one
// replaces it by changing `at` (stale events are recognised by their time and ignored).
void Network::schedule_earlier(SimTimeNs due, SimTimeNs& at, EventKind kind, uint32_t flow) {
  if (due == cc::kNever || due >= at) return;
  at = std::max(due, now_);
  events_.push(at, kind, flow);
}

void Network::sync_rp_timer(uint32_t flow) {
  Flow& f = flows_[flow];
  schedule_earlier(rp(f).next_event_ns(f.rp), f.rp_timer_at, EventKind::kRpTimer, flow);
}

void Network::sync_np_timer(uint32_t flow) {
  Flow& f = flows_[flow];
  schedule_earlier(np_.deferred_cnp_due(f.np), f.np_timer_at, EventKind::kNpTimer, flow);
}

}  // namespace rdmad::sim
