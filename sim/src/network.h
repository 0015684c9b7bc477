#pragma once
// Simulator internals: the data model (ports, switches, hosts, flows, packets) and the event
// handlers. Split by concern: network.cc (build, routing, event loop), network_switch.cc (buffer,
// PFC, ECN), network_host.cc (NIC scheduling, pacing, RP/NP), network_metrics.cc (sampling, results).
#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rdmad/cc/notification_point.h"
#include "rdmad/cc/reaction_point.h"
#include "rdmad/cc/red_marker.h"
#include "rdmad/sim/event_queue.h"
#include "rdmad/sim/results.h"
#include "rdmad/sim/rng.h"
#include "rdmad/sim/scenario.h"
#include "rdmad/sim/topology.h"
#include "rdmad/sim/traffic.h"
#include "ring_queue.h"

namespace rdmad::sim {

inline constexpr SimTimeNs kNoTime = INT64_MAX;
inline constexpr uint32_t kNone = UINT32_MAX;
inline constexpr uint32_t kManyPorts = 1u << 31;
__extension__ using Uint128 = unsigned __int128;

enum class PacketType : uint8_t { kData, kCnp, kAck, kNak };
// Priority 0 carries CNPs, ACKs and NAKs (strict priority, never paused); priority 1 carries data
// (PFC-controlled).
inline constexpr int kCtrlPrio = 0;
inline constexpr int kDataPrio = 1;

struct Packet {
  uint32_t flow;
  uint32_t wire_bytes;
  uint32_t payload_bytes;
  uint32_t ingress_port;  // global port it entered the current switch on
  uint32_t psn;           // data: its sequence number; ACK: the last one it covers; NAK: the one expected
  PacketType type;
  bool ce;
  bool in_headroom;     // buffered in the ingress port's PFC headroom
  bool ack_req;         // data: the receiver answers with an ACK
  SimTimeNs arrive_ns;  // when it reaches the far end of the link it is on
};
static_assert(sizeof(Packet) <= 32);

struct Port {
  uint32_t node;
  uint32_t peer;  // global index of the port at the other end of the link
  double ns_per_byte;
  SimTimeNs delay_ns;
  uint64_t rate_mbps;
  SimTimeNs busy_until = 0;      // serialising a packet until then
  bool tx_done_pending = false;  // a kTxDone is queued for busy_until
  bool paused = false;           // a PAUSE for the data priority was received
  bool xoff_sent = false;        // we paused the sender behind this (ingress) port
  bool bottleneck = false;
  bool headroom_explicit = false;  // headroom_bytes was set (switch.headroom_bytes or the link's)
  RingQueue queue[2];
  // Packets on the wire, in arrival order: a link delivers FIFO, so only the head needs an event.
  RingQueue in_flight;
  uint64_t queue_bytes[2] = {0, 0};
  uint64_t ingress_shared_bytes = 0;  // as an ingress: bytes charged to the shared pool
  uint64_t headroom_used_bytes = 0;
  uint64_t headroom_bytes = 0;
  // Static PFC thresholds of this ingress (0: dynamic): Xoff above pfc_xoff, Xon at pfc_xon or less.
  uint64_t pfc_xoff = 0;
  uint64_t pfc_xon = 0;
  uint64_t tx_wire_bytes = 0;
  uint64_t tx_data_wire_bytes = 0;  // data packets only (headers included), not CNPs
  uint64_t tx_at_sample = 0;
  uint64_t data_at_sample = 0;
  // After warm-up, over the sample intervals in which the port sent data: their length and the
  // data wire bytes sent in them (the busy-time utilisation, docs/simulator.md).
  SimTimeNs data_busy_ns = 0;
  uint64_t data_busy_bytes = 0;
  uint64_t tx_at_warmup = 0;
  // Bottleneck ports: data wire bytes of the packets through this port that the receiver took in
  // order (credited on arrival there), in total, at the last sample and in the busy intervals.
  uint64_t goodput_wire_bytes = 0;
  uint64_t goodput_at_sample = 0;
  uint64_t goodput_busy_bytes = 0;
  uint64_t goodput_at_warmup = 0;
  uint64_t max_queue_bytes = 0;  // after warm-up
  // PFC: time the data priority spent paused (closed spells) and when the open spell began.
  SimTimeNs paused_ns = 0;
  SimTimeNs paused_since = 0;
  // The series (utilization.csv, pauses.csv): data wire bytes and paused time at the open sample's start.
  uint64_t data_at_series = 0;
  SimTimeNs paused_at_series = 0;
  std::optional<cc::RedMarker> marker;
};

struct SwitchState {
  uint32_t node;
  uint64_t shared_size = 0;
  uint64_t shared_used = 0;
  // Per destination host: its ECMP set, (index into route_ports_) << 8 | size. Equal sets are
  // stored once, so route_ports_ stays small (a k = 16 fat-tree: 2.1 M entries before, 8.4 MB).
  std::vector<uint32_t> route;
};

struct Flow {
  uint32_t src;
  uint32_t dst;
  uint64_t hash;            // ECMP: next to src and dst, which every switch reads with it
  uint64_t size_bytes;      // 0 = unbounded
  uint64_t sent_bytes = 0;  // offset of the next byte to send (a go-back-N rewind moves it back)
  uint64_t recv_bytes = 0;  // payload taken in order by the receiver
  uint64_t recv_at_sample = 0;
  uint64_t recv_at_window = 0;
  SimTimeNs start_ns;
  SimTimeNs finish_ns = -1;
  SimTimeNs ideal_ns = 0;
  double next_send_ns = 0;
  double last_tx_ns = 0;         // start of the last packet, for re-pacing after a rate rise
  SimTimeNs ready_at = kNoTime;  // pending kFlowReady time; kNoTime when not waiting
  uint32_t last_wire_bytes = 0;
  SimTimeNs rp_timer_at = kNoTime;
  SimTimeNs np_timer_at = kNoTime;
  // Reliable delivery (network_transport.cc), in packets of mtu_bytes: the sender's first
  // unacknowledged PSN and the highest PSN sent plus one; the receiver's expected PSN.
  uint32_t una_psn = 0;
  uint32_t max_psn = 0;
  uint32_t expected_psn = 0;
  uint32_t gbn_psn = 0;            // the PSN the last NAK rewound to (a repeat of it is ignored)
  uint32_t pending_ack = kNone;    // the receiver's ACK queued and not sent yet (coalescing)
  // The bottleneck port on the flow's path, if any; with kManyPorts set, an index into
  // goodput_lists_ (a chosen list of bottleneck ports the path crosses more than one of).
  uint32_t goodput_port = kNone;
  SimTimeNs last_progress_ns = 0;  // una last moved (or the first packet after an idle spell)
  SimTimeNs last_ack_req_ns = 0;
  SimTimeNs retx_timer_at = kNoTime;
  bool gbn_active = false;
  bool nak_sent = false;  // receiver: one NAK per gap
  bool sending = false;   // started and not done sending
  cc::RpState rp;
  cc::NpState np;
};

class Network {
 public:
  explicit Network(const Scenario& s);
  RunResults run();

 private:
  // network.cc
  void build_ports();
  void build_routes();
  SimTimeNs path_ideal_ns(uint32_t flow) const;
  uint32_t goodput_port_of(uint32_t flow);
  void credit_goodput(const Flow& f, uint32_t wire_bytes);
  // The ports a flow's data leaves through, source first (its ECMP path is fixed by its hash).
  template <typename Fn>
  void for_each_hop(const Flow& f, Fn fn) const {
    uint32_t node = f.src;
    for (int guard = 0; node != f.dst && guard < 64; ++guard) {
      const uint32_t p = next_port(node, f, f.dst);
      fn(p);
      node = ports_[ports_[p].peer].node;
    }
  }
  uint32_t next_port(uint32_t node, const Flow& f, uint32_t dst_host) const;
  void dispatch(const Event& ev);
  void set_static_pfc(Port& p, const LinkSpec& link);
  uint32_t alloc_packet();
  uint32_t new_packet(uint32_t flow, PacketType type, uint32_t wire_bytes, uint32_t payload_bytes,
                      uint32_t psn);
  void free_packet(uint32_t p) { free_packets_.push_back(p); }
  void transmit(uint32_t port, uint32_t pkt);
  // Asks for a kTxDone when the port's current packet ends (only ports with a backlog need one).
  void wake_after_tx(uint32_t port);
  bool is_host(uint32_t node) const { return node < topo_.hosts; }
  const cc::ReactionPoint& rp(const Flow& f) const { return rps_[host_rp_[f.src]]; }
  // The flows that start in time order (all of them unless some wait for another).
  size_t chain_size() const { return chain_.empty() ? flows_.size() : chain_.size(); }
  uint32_t chain_at(size_t i) const { return chain_.empty() ? static_cast<uint32_t>(i) : chain_[i]; }
  void delivered(uint32_t flow);
  // network_switch.cc
  void switch_receive(uint32_t in_port, uint32_t pkt);
  void switch_start_tx(uint32_t port);
  void release_ingress(const Packet& pkt, uint32_t sw);
  void send_pause(uint32_t in_port, bool pause);
  // network_host.cc
  // `chain`: the flow's place in the time-ordered chain (kNone: started by the flow it waited for).
  void flow_start(uint32_t flow, uint32_t chain);
  void host_start_tx(uint32_t port);
  void host_receive(uint32_t pkt);
  void send_cnp(uint32_t flow);
  void queue_control(uint32_t host, uint32_t pkt_id);
  void sync_rp_timer(uint32_t flow);
  void repace(uint32_t flow);
  void sync_np_timer(uint32_t flow);
  // network_transport.cc
  bool lost_on_link(const Packet& pkt);
  uint32_t psn_of(const Flow& f) const { return static_cast<uint32_t>(f.sent_bytes / s_.mtu_bytes); }
  void on_data_sent(uint32_t flow, Packet& pkt);
  bool receive_data(const Packet& pkt);
  void send_ack(uint32_t flow, PacketType type, uint32_t psn);
  void on_ack_sent(uint32_t pkt_id);
  void receive_ack(const Packet& pkt);
  void acknowledge(uint32_t flow, uint32_t next_psn);
  void go_back_n(uint32_t flow, uint32_t psn);
  void retransmit_timer(uint32_t flow);
  void finish_flow(Flow& f);
  void schedule_earlier(SimTimeNs due, SimTimeNs& at, EventKind kind, uint32_t flow);
  double flow_rate_mbps(const Flow& f) const;
  // network_metrics.cc
  void sample();
  void close_jain_window();
  uint64_t fit_headroom(uint32_t node);
  uint64_t buffer_of(uint32_t node) const;
  double xoff_threshold(uint64_t shared_free) const;
  void incast_jain(RunResults& r) const;
  void collect_collectives(RunResults& r) const;
  SimTimeNs paused_total(const Port& p) const { return p.paused_ns + (p.paused ? now_ - p.paused_since : 0); }
  void close_series_sample();
  void collect_series(RunResults& r) const;
  void collect_sketch(RunResults& r) const;
  RunResults collect(double wall_seconds);
  void progress(bool final);
  std::string node_name(uint32_t node) const;
  std::string port_name(uint32_t port) const;  // "leaf0->spine1"

  Scenario s_;
  Topology topo_;
  EventQueue events_;
  SimTimeNs now_ = 0;
  SimTimeNs end_ns_;
  SimTimeNs warmup_ns_;
  SimTimeNs sample_ns_;
  SimTimeNs jain_window_ns_;
  SimTimeNs next_window_ns_;
  SimTimeNs warmup_mark_ns_ = -1;  // first sample at or after warm-up
  SimTimeNs last_sample_ns_ = 0;

  std::vector<Port> ports_;
  std::vector<uint32_t> node_first_port_;  // size nodes+1
  std::vector<SwitchState> switches_;      // index node - hosts
  std::vector<uint32_t> route_ports_;
  // Per ECMP set size d: ⌊2^128 / d⌋ + 1, for h % d by multiplication (Lemire's fastmod; exact for
  // every 64-bit h) instead of a 64-bit division on every hop.
  std::array<Uint128, 256> ecmp_magic_{};
  std::vector<RingQueue> host_ready_;  // per host: flows allowed to send now
  std::vector<Flow> flows_;
  Traffic traffic_;              // its flows are in flows_; the rest: dependencies, collectives, Jain's sets
  std::vector<uint32_t> chain_;  // flows that start at a time, in order (empty: every flow)
  std::vector<uint32_t> dep_offset_;  // per flow: its dependents in dep_list_ (empty: none wait)
  std::vector<uint32_t> dep_list_;
  std::vector<SimTimeNs> delivered_ns_;               // per flow, with collectives: its last byte's arrival
  std::vector<std::vector<uint32_t>> goodput_lists_;  // Flow::goodput_port with kManyPorts
  std::vector<Packet> packets_;
  std::vector<uint32_t> free_packets_;

  std::vector<cc::ReactionPoint> rps_;  // one per NIC line rate
  std::vector<uint8_t> host_rp_;        // per NIC: its reaction point in rps_
  std::vector<double> host_line_mbps_;  // per NIC: its link's rate
  cc::NotificationPoint np_;

  uint64_t drops_ = 0;
  uint64_t pfc_pauses_ = 0;
  uint64_t cnps_sent_ = 0;
  uint64_t ecn_marks_ = 0;
  uint64_t hops_ = 0;
  uint64_t events_run_ = 0;
  uint32_t flows_done_ = 0;
  // Reliable delivery: on for this run (transport.acks), its timeout, and what it counted.
  bool reliable_ = false;
  SimTimeNs retx_timeout_ns_ = 0;
  bool lossy_links_ = false;  // [loss] set
  Rng loss_rng_;
  std::vector<InjectedLoss> pending_drops_;  // [[loss.drop]] not yet applied
  uint64_t wire_losses_ = 0;
  uint64_t acks_sent_ = 0;
  uint64_t naks_sent_ = 0;
  uint64_t timeouts_ = 0;
  uint64_t rewinds_ = 0;
  uint64_t retx_packets_ = 0;
  uint64_t retx_bytes_ = 0;
  uint64_t out_of_order_ = 0;
  uint64_t duplicates_ = 0;
  uint64_t delivered_bytes_ = 0;
  uint64_t delivered_at_warmup_ = 0;
  uint64_t delivered_at_sample_ = 0;
  uint32_t bounded_flows_ = 0;

  std::vector<RateSample> rates_;
  std::vector<QueueSample> queue_samples_;
  std::vector<double> queue_values_;
  std::vector<double> jain_windows_;
  std::vector<std::string> warnings_;
  std::vector<uint32_t> bottleneck_ports_;
  // Per-port series: closed samples (start, width) and, per port, their data bytes and paused time.
  // The open sample began at series_open_ns_; at output.series_samples closed ones, pairs merge.
  SimTimeNs series_width_ns_;
  SimTimeNs series_open_ns_ = 0;
  std::vector<SimTimeNs> series_start_;
  std::vector<SimTimeNs> series_width_;
  std::vector<std::vector<uint64_t>> series_data_;
  std::vector<std::vector<SimTimeNs>> series_paused_;
  std::chrono::steady_clock::time_point wall_start_;
  std::chrono::steady_clock::time_point last_progress_;
  bool progress_shown_ = false;
};

}  // namespace rdmad::sim
