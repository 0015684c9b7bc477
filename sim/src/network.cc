#include "network.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <stdexcept>

#include "rdmad/sim/rng.h"

namespace rdmad::sim {
namespace {

SimTimeNs ms_to_ns(double ms) { return static_cast<SimTimeNs>(std::llround(ms * 1e6)); }

}  // namespace

Network::Network(const Scenario& s)
    : s_(s),
      topo_(build_topology(s.topology)),
      end_ns_(ms_to_ns(s.duration_ms)),
      warmup_ns_(ms_to_ns(s.warmup_ms)),
      sample_ns_(std::max<SimTimeNs>(1, static_cast<SimTimeNs>(s.sample_interval_us * 1000))),
      jain_window_ns_(std::max<SimTimeNs>(1, ms_to_ns(s.output.jain_window_ms))),
      next_window_ns_(warmup_ns_ + jain_window_ns_),
      np_(s.dcqcn),
      reliable_(s.transport.acks == AckMode::kOn ||
                (s.transport.acks == AckMode::kAuto && (!s.sw.pfc || s.loss.any()))),
      retx_timeout_ns_(std::max<SimTimeNs>(1, std::llround(s.transport.retransmit_timeout_us * 1000))),
      lossy_links_(s.loss.any()),
      loss_rng_(mix64(s.seed ^ 0x1055ULL)),
      pending_drops_(s.loss.drops) {
  build_ports();
  build_routes();
  traffic_ = make_traffic(s_, topo_);
  const std::vector<FlowSpec>& specs = traffic_.flows;
  flows_.reserve(specs.size());
  for (uint32_t i = 0; i < specs.size(); ++i) {
    const FlowSpec& spec = specs[i];
    Flow f{};
    f.src = spec.src;
    f.dst = spec.dst;
    f.size_bytes = spec.size_bytes;
    f.start_ns = spec.start_ns;
    f.finish_ns = -1;
    f.rp_timer_at = kNoTime;
    f.np_timer_at = kNoTime;
    f.hash = mix64(s_.seed * 0x9e3779b97f4a7c15ULL + i);
    flows_.push_back(f);
    flows_.back().ideal_ns = path_ideal_ns(i);
    flows_.back().goodput_port = goodput_port_of(i);
    if (spec.size_bytes > 0) ++bounded_flows_;
  }
  // Flows that wait for another start when its last byte arrives (delivered()), not in the chain.
  if (!traffic_.after.empty()) {
    std::vector<uint32_t> count(flows_.size() + 1, 0);
    for (uint32_t i = 0; i < flows_.size(); ++i) {
      if (traffic_.after[i] == kNoFlow) {
        chain_.push_back(i);
      } else {
        ++count[traffic_.after[i] + 1];
        flows_[i].start_ns = kNoTime;
      }
    }
    dep_offset_.assign(flows_.size() + 1, 0);
    for (uint32_t i = 0; i < flows_.size(); ++i) dep_offset_[i + 1] = dep_offset_[i] + count[i + 1];
    dep_list_.resize(dep_offset_.back());
    std::vector<uint32_t> fill(dep_offset_.begin(), dep_offset_.end() - 1);
    for (uint32_t i = 0; i < flows_.size(); ++i) {
      if (traffic_.after[i] != kNoFlow) dep_list_[fill[traffic_.after[i]]++] = i;
    }
  }
  if (!traffic_.collectives.empty() || !dep_list_.empty()) delivered_ns_.assign(flows_.size(), -1);
  host_ready_.resize(topo_.hosts);
  series_width_ns_ = sample_ns_;
  series_data_.resize(ports_.size());
  series_paused_.resize(ports_.size());
  packets_.reserve(1 << 16);
}

void Network::build_ports() {
  std::vector<std::vector<std::pair<uint32_t, size_t>>> adj(topo_.nodes());  // (peer, link)
  for (size_t l = 0; l < topo_.links.size(); ++l) {
    adj[topo_.links[l].a].emplace_back(topo_.links[l].b, l);
    adj[topo_.links[l].b].emplace_back(topo_.links[l].a, l);
  }
  node_first_port_.assign(topo_.nodes() + 1, 0);
  for (uint32_t n = 0; n < topo_.nodes(); ++n) {
    node_first_port_[n + 1] = node_first_port_[n] + static_cast<uint32_t>(adj[n].size());
  }
  ports_.resize(node_first_port_.back());
  host_line_mbps_.resize(topo_.hosts);
  // The port of node n towards peer m is the k-th entry in adj[n]; find the reverse index by search.
  for (uint32_t n = 0; n < topo_.nodes(); ++n) {
    for (size_t k = 0; k < adj[n].size(); ++k) {
      auto [m, l] = adj[n][k];
      const LinkSpec& link = topo_.links[l];
      Port& p = ports_[node_first_port_[n] + k];
      p.node = n;
      size_t back = 0;
      while (adj[m][back].second != l) ++back;
      p.peer = node_first_port_[m] + static_cast<uint32_t>(back);
      p.rate_mbps = static_cast<uint64_t>(link.gbps * 1000);
      p.ns_per_byte = 8.0 / link.gbps;
      p.delay_ns = link.delay_ns;
      if (is_host(n)) host_line_mbps_[n] = link.gbps * 1000;
      uint64_t mtu_wire = s_.mtu_bytes + s_.header_bytes;
      // Headroom must absorb what is in flight while the PAUSE travels: 2·BDP of this port's link
      // plus a frame each way.
      p.headroom_explicit = link.headroom_bytes != 0 || s_.sw.headroom_bytes != 0;
      p.headroom_bytes = link.headroom_bytes != 0 ? link.headroom_bytes
                         : s_.sw.headroom_bytes != 0
                             ? s_.sw.headroom_bytes
                             : static_cast<uint64_t>(2 * link.delay_ns * link.gbps / 8) + 3 * mtu_wire;
      if (!is_host(n) && s_.sw.pfc) set_static_pfc(p, link);
      if (!is_host(n) && s_.sw.ecn) {
        p.marker.emplace(cc::RedParams{s_.sw.kmin_bytes, s_.sw.kmax_bytes, s_.sw.pmax},
                         mix64(s_.seed ^ (0xec0000ULL + node_first_port_[n] + k)));
      }
    }
  }
  switches_.resize(topo_.switches);
  for (uint32_t i = 0; i < topo_.switches; ++i) {
    SwitchState& sw = switches_[i];
    sw.node = topo_.hosts + i;
    sw.shared_size = buffer_of(sw.node) - (s_.sw.pfc ? fit_headroom(sw.node) : 0);
  }
  // One reaction point per NIC line rate (the rate a QP starts at and never exceeds).
  for (uint32_t h = 0; h < topo_.hosts; ++h) {
    const auto line = static_cast<uint32_t>(host_line_mbps_[h]);
    size_t k = 0;
    while (k < rps_.size() && rps_[k].line_rate_mbps() != line) ++k;
    if (k == rps_.size()) rps_.emplace_back(s_.dcqcn, line);
    if (k > UINT8_MAX) throw std::runtime_error("topology: more than 256 different NIC rates");
    host_rp_.push_back(static_cast<uint8_t>(k));
  }
  for (auto [from, to] : topo_.bottlenecks) {
    for (uint32_t p = node_first_port_[from]; p < node_first_port_[from + 1]; ++p) {
      if (ports_[ports_[p].peer].node == to) {
        ports_[p].bottleneck = true;
        bottleneck_ports_.push_back(p);
      }
    }
  }
}

// Shortest paths by BFS from every host; a switch's next hops towards host h are all neighbours one
// step closer (the ECMP set).
void Network::build_routes() {
  const uint32_t n_nodes = topo_.nodes();
  for (auto& sw : switches_) sw.route.assign(topo_.hosts, 0);
  for (uint32_t d = 1; d < ecmp_magic_.size(); ++d) ecmp_magic_[d] = ~Uint128{0} / d + 1;
  std::map<std::vector<uint32_t>, uint32_t> sets;  // an ECMP set -> its index in route_ports_
  std::vector<uint32_t> set;
  std::vector<uint32_t> dist(n_nodes);
  for (uint32_t h = 0; h < topo_.hosts; ++h) {
    std::fill(dist.begin(), dist.end(), kNone);
    std::deque<uint32_t> frontier{h};
    dist[h] = 0;
    while (!frontier.empty()) {
      uint32_t n = frontier.front();
      frontier.pop_front();
      if (n != h && is_host(n)) continue;  // hosts do not forward
      for (uint32_t p = node_first_port_[n]; p < node_first_port_[n + 1]; ++p) {
        uint32_t m = ports_[ports_[p].peer].node;
        if (dist[m] == kNone) {
          dist[m] = dist[n] + 1;
          frontier.push_back(m);
        }
      }
    }
    for (auto& sw : switches_) {
      set.clear();
      for (uint32_t p = node_first_port_[sw.node]; p < node_first_port_[sw.node + 1]; ++p) {
        uint32_t m = ports_[ports_[p].peer].node;
        if (dist[sw.node] != kNone && dist[m] + 1 == dist[sw.node] && (!is_host(m) || m == h)) {
          set.push_back(p);
        }
      }
      // No path (a partitioned custom topology) is left at size 0: traffic checks its flows have one.
      if (set.size() > 255) throw std::runtime_error("topology: more than 255 equal-cost paths to one host");
      auto [it, added] = sets.try_emplace(set, static_cast<uint32_t>(route_ports_.size()));
      if (added) route_ports_.insert(route_ports_.end(), set.begin(), set.end());
      if (it->second >= (1u << 24)) throw std::runtime_error("topology: too many distinct ECMP sets");
      sw.route[h] = it->second << 8 | static_cast<uint32_t>(set.size());
    }
  }
}

uint32_t Network::next_port(uint32_t node, const Flow& f, uint32_t dst_host) const {
  if (is_host(node)) return node_first_port_[node];
  const uint32_t route = switches_[node - topo_.hosts].route[dst_host];
  const uint32_t count = route & 0xff;
  const uint32_t first = route >> 8;
  if (count == 1) return route_ports_[first];
  // mix64(...) % count, exactly, without a division (Lemire, Kaser, Kurz: "Faster remainder by
  // direct computation", 2019): the low 128 bits of magic·h, times count, over 2^128.
  using U128 = Uint128;
  const U128 low = ecmp_magic_[count] * mix64(f.hash ^ (uint64_t{node} << 40));
  const U128 bottom = (static_cast<U128>(static_cast<uint64_t>(low)) * count) >> 64;
  const U128 top = (low >> 64) * count;
  return route_ports_[first + static_cast<uint32_t>((bottom + top) >> 64)];
}

// Base RTT of the flow's own ECMP path (propagation both ways plus one full frame's store-and-forward
// at every hop) plus the time to put its bytes through the slowest link of the path (the sender's
// on every generated topology but a dumbbell with a slower fabric link).
SimTimeNs Network::path_ideal_ns(uint32_t flow) const {
  const Flow& f = flows_[flow];
  double rtt = 0;
  double ns_per_byte = 0;
  for_each_hop(f, [&](uint32_t port) {
    const Port& p = ports_[port];
    rtt += 2.0 * static_cast<double>(p.delay_ns) + (s_.mtu_bytes + s_.header_bytes) * p.ns_per_byte;
    ns_per_byte = std::max(ns_per_byte, p.ns_per_byte);
  });
  return static_cast<SimTimeNs>(rtt + static_cast<double>(f.size_bytes) * ns_per_byte);
}

// The bottleneck ports the flow's data crosses, whose goodput its in-order packets count in: one
// on every generated topology; a list of bottlenecks (topology.bottlenecks) may put several on a path.
uint32_t Network::goodput_port_of(uint32_t flow) {
  std::vector<uint32_t> found;
  for_each_hop(flows_[flow], [&](uint32_t port) {
    if (ports_[port].bottleneck) found.push_back(port);
  });
  if (found.size() <= 1) return found.empty() ? kNone : found[0];
  for (uint32_t i = 0; i < goodput_lists_.size(); ++i) {
    if (goodput_lists_[i] == found) return kManyPorts | i;
  }
  goodput_lists_.push_back(std::move(found));
  return kManyPorts | static_cast<uint32_t>(goodput_lists_.size() - 1);
}

void Network::credit_goodput(const Flow& f, uint32_t wire_bytes) {
  if (f.goodput_port == kNone) return;
  if ((f.goodput_port & kManyPorts) == 0)
    return void(ports_[f.goodput_port].goodput_wire_bytes += wire_bytes);
  for (uint32_t p : goodput_lists_[f.goodput_port & ~kManyPorts]) ports_[p].goodput_wire_bytes += wire_bytes;
}

uint64_t Network::buffer_of(uint32_t node) const {
  const uint64_t own = topo_.switch_buffer_bytes[node - topo_.hosts];
  return own != 0 ? own : s_.sw.buffer_bytes;
}

// Static Xoff/Xon of a switch ingress: the link's ([[topology.link]]), else the switch's
// (switch.pfc_xoff_bytes); Xon defaults to xon_offset_bytes below Xoff.
void Network::set_static_pfc(Port& p, const LinkSpec& link) {
  const bool own = link.pfc_xoff_bytes != 0;
  p.pfc_xoff = own ? link.pfc_xoff_bytes : s_.sw.pfc_xoff_bytes;
  if (p.pfc_xoff == 0) return;
  const uint64_t offset =
      s_.sw.xon_offset_bytes != 0 ? s_.sw.xon_offset_bytes : 2 * uint64_t{s_.mtu_bytes + s_.header_bytes};
  const uint64_t xon = link.pfc_xon_bytes != 0 ? link.pfc_xon_bytes : own ? 0 : s_.sw.pfc_xon_bytes;
  p.pfc_xon = xon != 0 ? xon : p.pfc_xoff - std::min(p.pfc_xoff, offset);
  if (p.pfc_xon >= p.pfc_xoff) {
    throw std::runtime_error(
        fmt::format("{}: key 'topology.link.pfc_xon_bytes' ({}) must be below the port's Xoff ({})", link.at,
                    p.pfc_xon, p.pfc_xoff));
  }
}

// The switch's PFC headroom, all ingress ports together. Explicit headroom (switch.headroom_bytes,
// a link's headroom_bytes) that does not fit is an error naming the key; the automatic 2·BDP one
// (long links) is scaled down to half of what the explicit one leaves, with a warning, so a
// long-delay run starts but may drop under PFC.
uint64_t Network::fit_headroom(uint32_t node) {
  const uint32_t first = node_first_port_[node];
  const uint32_t last = node_first_port_[node + 1];
  uint64_t fixed = 0;
  uint64_t automatic = 0;
  for (uint32_t p = first; p < last; ++p)
    (ports_[p].headroom_explicit ? fixed : automatic) += ports_[p].headroom_bytes;
  const uint64_t buffer = buffer_of(node);
  const std::string& buffer_at = topo_.switch_buffer_bytes[node - topo_.hosts] != 0
                                     ? topo_.switch_at[node - topo_.hosts]
                                     : s_.sw.buffer_bytes_at;
  const char* buffer_key = topo_.switch_buffer_bytes[node - topo_.hosts] != 0 ? "topology.node.buffer_bytes"
                                                                              : "switch.buffer_bytes";
  const std::string& name = topo_.switch_names[node - topo_.hosts];
  const LinkSpec* by_link = nullptr;  // a link that set headroom here, for the message
  for (size_t i = 0; fixed >= buffer && by_link == nullptr && i < topo_.links.size(); ++i) {
    const LinkSpec& l = topo_.links[i];
    if (l.headroom_bytes != 0 && (l.a == node || l.b == node)) by_link = &l;
  }
  if (fixed >= buffer && by_link == nullptr) {
    throw std::runtime_error(
        fmt::format("{}: key 'switch.headroom_bytes' ({} per ingress port, {} on switch {} with {} ports) "
                    "does not fit in {} ({}, {}): needs {} > {}",
                    s_.sw.headroom_bytes_at, s_.sw.headroom_bytes, fixed, name, last - first, buffer_key,
                    buffer, buffer_at, buffer_key, fixed));
  }
  if (fixed >= buffer) {
    throw std::runtime_error(
        fmt::format("{}: key 'topology.link.headroom_bytes': switch {}'s explicit PFC headroom ({} over its "
                    "ports) does not fit in {} ({}, {}): needs {} > {}",
                    by_link->at, name, fixed, buffer_key, buffer, buffer_at, buffer_key, fixed));
  }
  const uint64_t room = (buffer - fixed) / 2;
  if (automatic <= room) return fixed + automatic;
  const double scale = static_cast<double>(room) / static_cast<double>(automatic);
  uint64_t capped = 0;
  for (uint32_t p = first; p < last; ++p) {
    if (ports_[p].headroom_explicit) continue;
    ports_[p].headroom_bytes = static_cast<uint64_t>(static_cast<double>(ports_[p].headroom_bytes) * scale);
    capped += ports_[p].headroom_bytes;
  }
  warnings_.push_back(fmt::format(
      "{}: {} ({}) cannot hold switch {}'s automatic PFC headroom of 2·BDP per port ({} in all): capped to "
      "{} "
      "({}), so PFC may drop; lossless needs {} >= {} (headroom + as much shared buffer) or an explicit "
      "switch.headroom_bytes",
      buffer_at, buffer_key, buffer, name, automatic, capped,
      fixed == 0 ? "half the buffer" : "half of what the explicit headroom leaves", buffer_key,
      fixed + 2 * automatic));
  return fixed + capped;
}

uint32_t Network::alloc_packet() {
  if (!free_packets_.empty()) {
    uint32_t p = free_packets_.back();
    free_packets_.pop_back();
    return p;
  }
  packets_.emplace_back();
  return static_cast<uint32_t>(packets_.size() - 1);
}

uint32_t Network::new_packet(uint32_t flow, PacketType type, uint32_t wire_bytes, uint32_t payload_bytes,
                             uint32_t psn) {
  const uint32_t id = alloc_packet();
  packets_[id] = Packet{.flow = flow,
                        .wire_bytes = wire_bytes,
                        .payload_bytes = payload_bytes,
                        .ingress_port = 0,
                        .psn = psn,
                        .type = type,
                        .ce = false,
                        .in_headroom = false,
                        .ack_req = false,
                        .arrive_ns = 0};
  return id;
}

// Puts a packet on the wire: the port is busy for its serialisation time, and the packet arrives at
// the far end one propagation delay after its last bit leaves.
void Network::transmit(uint32_t port, uint32_t pkt) {
  Port& p = ports_[port];
  uint32_t bytes = packets_[pkt].wire_bytes;
  p.tx_wire_bytes += bytes;
  if (packets_[pkt].type == PacketType::kData) p.tx_data_wire_bytes += bytes;
  auto ser = static_cast<SimTimeNs>(std::ceil(bytes * p.ns_per_byte));
  p.busy_until = now_ + ser;
  packets_[pkt].arrive_ns = now_ + ser + p.delay_ns;
  if (p.in_flight.empty()) events_.push(packets_[pkt].arrive_ns, EventKind::kArrive, port);
  p.in_flight.push(pkt);
}

// Most ports on a lightly loaded fabric send one packet and fall idle; they need no completion event.
void Network::wake_after_tx(uint32_t port) {
  Port& p = ports_[port];
  if (p.tx_done_pending) return;
  p.tx_done_pending = true;
  events_.push(p.busy_until, EventKind::kTxDone, port);
}

void Network::dispatch(const Event& ev) {
  switch (ev.kind) {
    case EventKind::kTxDone:
      ports_[ev.a].tx_done_pending = false;
      if (is_host(ports_[ev.a].node)) {
        host_start_tx(ev.a);
      } else {
        switch_start_tx(ev.a);
      }
      break;
    case EventKind::kArrive: {
      Port& link = ports_[ev.a];
      const uint32_t pkt = link.in_flight.pop();
      if (!link.in_flight.empty())
        events_.push(packets_[link.in_flight.front()].arrive_ns, EventKind::kArrive, ev.a);
      ++hops_;
      if (lossy_links_ && lost_on_link(packets_[pkt])) {  // corrupted on the wire: the far end discards it
        ++wire_losses_;
        free_packet(pkt);
        break;
      }
      if (is_host(ports_[link.peer].node)) {
        host_receive(pkt);
      } else {
        switch_receive(link.peer, pkt);
      }
      break;
    }
    case EventKind::kFlowStart:
      flow_start(ev.a, ev.b);
      break;
    case EventKind::kFlowReady: {
      Flow& f = flows_[ev.a];
      if (ev.time_ns != f.ready_at) break;  // re-paced earlier
      f.ready_at = kNoTime;
      host_ready_[f.src].push(ev.a);
      host_start_tx(node_first_port_[f.src]);
      break;
    }
    case EventKind::kRpTimer: {
      Flow& f = flows_[ev.a];
      if (ev.time_ns != f.rp_timer_at) break;  // superseded
      f.rp_timer_at = kNoTime;
      if (!f.sending) break;
      rp(f).on_timer(f.rp, now_);
      sync_rp_timer(ev.a);
      repace(ev.a);
      break;
    }
    case EventKind::kNpTimer: {
      Flow& f = flows_[ev.a];
      if (ev.time_ns != f.np_timer_at) break;
      f.np_timer_at = kNoTime;
      if (np_.on_timer(f.np, now_)) send_cnp(ev.a);
      sync_np_timer(ev.a);
      break;
    }
    case EventKind::kPause: {
      Port& p = ports_[ev.a];
      const bool pause = ev.b != 0;
      if (pause && !p.paused) p.paused_since = now_;
      if (!pause && p.paused) p.paused_ns += now_ - p.paused_since;
      p.paused = pause;
      if (!p.paused) {
        if (is_host(p.node)) {
          host_start_tx(ev.a);
        } else {
          switch_start_tx(ev.a);
        }
      }
      break;
    }
    case EventKind::kRetxTimer:
      if (ev.time_ns == flows_[ev.a].retx_timer_at) retransmit_timer(ev.a);
      break;
    case EventKind::kSample:
      sample();
      break;
  }
}

RunResults Network::run() {
  wall_start_ = std::chrono::steady_clock::now();
  last_progress_ = wall_start_;
  if (chain_size() > 0) events_.push(flows_[chain_at(0)].start_ns, EventKind::kFlowStart, chain_at(0), 0);
  events_.push(sample_ns_, EventKind::kSample, 0);
  while (!events_.empty() && events_.next_time() <= end_ns_) {
    Event ev = events_.pop();
    now_ = ev.time_ns;
    dispatch(ev);
    if ((++events_run_ & 0xffff) == 0) progress(false);
    if (bounded_flows_ > 0 && flows_done_ == bounded_flows_ && bounded_flows_ == flows_.size()) break;
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
  progress(true);
  return collect(wall);
}

}  // namespace rdmad::sim
