#pragma once
// What a run produces: the summary figures, the per-flow FCT records and the time series. Writing
// them (summary.json, the CSVs, PNG plots) lives in output.h.
#include <cstdint>
#include <string>
#include <vector>

#include "rdmad/sim/event_queue.h"

namespace rdmad::sim {

struct Percentiles {
  double p50 = 0;
  double p95 = 0;
  double p99 = 0;
  double max = 0;
  uint64_t count = 0;
};
// Nearest-rank percentiles; sorts `values`.
Percentiles percentiles(std::vector<double>& values);

struct FctRecord {
  uint32_t flow;
  uint32_t src;
  uint32_t dst;
  uint64_t size_bytes;
  SimTimeNs start_ns;  // -1: a flow waiting for another that never started
  SimTimeNs fct_ns;    // -1: not finished when the run ended
  SimTimeNs ideal_ns;  // base RTT + size·8/line rate
  double slowdown;     // max(1, fct/ideal); 0 when unfinished
};

struct RateSample {
  SimTimeNs time_ns;
  uint32_t flow;
  double delivered_gbps;  // payload received in the last sample interval
  double cc_rate_gbps;    // the reaction point's current rate Rc
};

struct QueueSample {
  SimTimeNs time_ns;
  uint32_t port;  // index into RunResults::port_names
  uint64_t bytes;
};

// One bottleneck port (RunResults::port_names, same order).
struct PortUtilization {
  double busy_ms = 0;           // after warm-up: sample intervals in which the port sent data
  uint64_t data_bytes = 0;      // data wire bytes (headers included) sent in those intervals
  double busy_utilization = 0;  // data_bytes·8 / (capacity · busy_ms); 0 when never busy
  double utilization = 0;       // every wire byte (CNPs too) / capacity over the whole measured time
  // Of data_bytes, the packets the receiver took in order (counted as they arrive there), and
  // their share of the busy capacity: below busy_utilization by what loss and go-back-N wasted.
  uint64_t goodput_bytes = 0;
  double busy_goodput = 0;
};

// One port's time series (utilization.csv, pauses.csv), one value per RunResults::series_start_ns.
struct PortSeries {
  std::string port;                 // "leaf0->spine1"
  std::vector<double> utilization;  // data wire bits sent / (capacity · sample width)
  std::vector<double> paused;       // share of the sample its data priority was paused by PFC
  double data_bytes = 0;            // data wire bytes over the whole run
  double paused_ms = 0;             // paused time over the whole run
};

// Where a node sits in the topology sketch (topology.png): level 0 the hosts, then each switch
// one more than its nearest neighbour closer to a host (leaf 1, spine 2, …); x in (0, 1) in index
// order within the level.
struct SketchNode {
  std::string name;
  uint32_t level = 0;
  double x = 0;
};
struct SketchLink {
  uint32_t a;
  uint32_t b;
  double gbps;
};

// Reliable delivery (transport.acks) and the losses it recovers from.
struct TransportCounters {
  bool acks = false;                   // ACKs and go-back-N were on for the run
  uint64_t wire_losses = 0;            // packets lost on links ([loss]), any kind
  uint64_t acks_sent = 0;              // ACK packets the receivers sent (after coalescing)
  uint64_t naks_sent = 0;              // sequence NAKs, one per gap
  uint64_t timeouts = 0;               // retransmit timeouts that rewound a flow
  uint64_t rewinds = 0;                // go-back-N rewinds, by NAK or by timeout
  uint64_t retransmitted_packets = 0;  // data packets sent again (PSN below the highest sent)
  uint64_t retransmitted_bytes = 0;    // their payload
  uint64_t out_of_order_packets = 0;   // data packets past a gap, discarded by the receiver
  uint64_t duplicate_packets = 0;      // data packets received again, discarded
};

// A collective's progress (Traffic::collectives): when its last byte arrived, and each phase's.
struct CollectiveResult {
  std::string name;
  std::string kind;       // "allreduce", "alltoall"
  std::string algorithm;  // "ring", "halving_doubling"; empty for all-to-all
  uint32_t ranks = 0;
  uint32_t rails = 0;
  uint64_t size_bytes = 0;
  uint32_t flows = 0;
  uint32_t flows_completed = 0;
  double start_us = 0;
  double completion_us = -1;      // start to the last byte of its last phase; −1 when unfinished
  std::vector<double> phases_us;  // start to the last byte of each phase; −1 when unfinished
};

struct SizeBucket {
  std::string label;
  uint64_t lo_bytes;  // inclusive
  uint64_t hi_bytes;  // exclusive
  Percentiles slowdown;
};

struct RunResults {
  std::string scenario;
  uint64_t seed = 0;
  // Minimum over complete windows after warm-up (incast: over bursts, jain_bursts); -1 when undefined.
  double jain_index = -1;
  double jain_index_mean = -1;
  std::vector<double> jain_windows;
  std::vector<double> jain_bursts;  // incast: Jain's index of each burst (size/FCT of its flows)
  // Σ data_bytes·8 / Σ capacity·busy time over the bottleneck ports (PortUtilization): the ports that
  // carry data, over the time they are busy.
  double bottleneck_utilization = 0;
  std::vector<PortUtilization> port_utilization;
  // As bottleneck_utilization, counting only the data the receivers took in order (goodput_bytes).
  double bottleneck_goodput = 0;
  uint64_t delivered_bytes = 0;  // payload taken in order by the receivers, whole run
  double goodput_gbps = 0;       // of it, what arrived after warm-up, over the measured time
  TransportCounters transport;
  Percentiles queue_bytes;  // sampled bottleneck queues after warm-up (max is exact)
  uint64_t pfc_pauses = 0;  // Xoff frames sent
  uint64_t drops = 0;
  uint64_t cnps_sent = 0;
  uint64_t ecn_marks = 0;
  uint64_t events = 0;
  uint64_t packet_hops = 0;  // packets delivered over a link
  double wall_seconds = 0;
  double simulated_ms = 0;
  uint32_t flows_total = 0;
  uint32_t flows_completed = 0;
  std::vector<SizeBucket> fct_slowdown;
  std::vector<CollectiveResult> collectives;
  std::vector<FctRecord> fct;
  std::vector<RateSample> rates;
  std::vector<QueueSample> queues;
  std::vector<std::string> port_names;  // "leaf0->host3"
  // Per-port series over the whole run, at most output.series_samples samples each: the ports that
  // sent data (utilization.csv) and those PFC paused (pauses.csv); the samples' start and width.
  std::vector<SimTimeNs> series_start_ns;
  std::vector<SimTimeNs> series_width_ns;
  std::vector<PortSeries> port_series;
  double pfc_paused_ms = 0;  // Σ over every port of the time its data priority was paused
  std::vector<SketchNode> sketch_nodes;
  std::vector<SketchLink> sketch_links;
  std::vector<std::string> warnings;  // settings the run adjusted (each also on stderr)
};

}  // namespace rdmad::sim
