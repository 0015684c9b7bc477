#pragma once
// A simulation scenario: every knob of a run, read from a TOML file plus `--set key=value`
// overrides. The key reference lives in docs/simulator.md; unknown keys are errors.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "rdmad/cc/dcqcn_params.h"

namespace rdmad::sim {

enum class TopologyKind : uint8_t { kStar, kDumbbell, kLeafSpine, kFatTree };
enum class TrafficKind : uint8_t { kLongFlows, kIncast, kPoisson };

struct TopologyConfig {
  TopologyKind kind = TopologyKind::kStar;
  uint32_t senders = 8;  // star / dumbbell: sending hosts (dumbbell: as many receivers)
  uint32_t leaves = 4;   // leaf-spine
  uint32_t spines = 4;
  uint32_t hosts_per_leaf = 8;
  uint32_t fat_tree_k = 4;  // k-ary fat-tree: k^3/4 hosts
  double host_link_gbps = 100;
  double fabric_link_gbps = 100;  // switch-to-switch links (dumbbell: the bottleneck)
  int64_t link_delay_ns = 1000;   // propagation delay of every link
};

struct SwitchConfig {
  uint64_t buffer_bytes = 32ull << 20;  // shared packet buffer per switch
  double dt_alpha = 1.0;                // dynamic threshold: a queue may hold alpha·(free shared buffer)
  bool pfc = true;
  double pfc_alpha = 1.0 / 8;     // Xoff when an ingress holds more than pfc_alpha·(free shared)
  uint64_t headroom_bytes = 0;    // per ingress port beyond Xoff; 0 = 2·BDP of the link + 2 MTU
  uint64_t xon_offset_bytes = 0;  // Xon this far below Xoff; 0 = 2 MTU
  // Static PFC thresholds per ingress port (as switches and htsim set them), instead of the dynamic
  // pfc_alpha one: Xoff when the ingress holds more than pfc_xoff_bytes of shared buffer, Xon at
  // pfc_xon_bytes or less. 0 = dynamic; pfc_xon_bytes 0 with a static Xoff = Xoff − 2 frames.
  uint64_t pfc_xoff_bytes = 0;
  uint64_t pfc_xon_bytes = 0;
  // Where buffer_bytes and headroom_bytes were set ("file:line", or the file when defaulted), for
  // errors found once the topology is known.
  std::string buffer_bytes_at;
  std::string headroom_bytes_at;
  bool ecn = true;
  uint64_t kmin_bytes = 400'000;  // RED/ECN per egress data queue
  uint64_t kmax_bytes = 1'600'000;
  double pmax = 0.2;
};

struct TrafficConfig {
  TrafficKind kind = TrafficKind::kLongFlows;
  uint32_t flows = 0;               // long flows / incast senders; 0 = every sender
  double start_us = 0;              // first flow's start
  double stagger_us = 0;            // long flows: flow i starts at start + i·stagger
  uint64_t size_bytes = 0;          // long flows: 0 = runs until the end; incast: bytes per sender
  uint32_t bursts = 1;              // incast: number of bursts
  double burst_interval_us = 1000;  // incast: time between bursts
  double load = 0.3;                // poisson: offered load per host link
  std::filesystem::path cdf;        // poisson: flow-size CDF (relative paths: to the scenario file)
  uint32_t flow_count = 1000;       // poisson: flows to generate
};

// Reliable delivery (docs/simulator.md, "Loss and recovery"): ACKs coalesced as the soft RoCEv2
// backend coalesces them, go-back-N on a sequence NAK or a retransmit timeout.
enum class AckMode : uint8_t {
  kAuto,  // on when the fabric can lose packets (switch.pfc = false, or [loss] set); off under PFC
  kOn,
  kOff,  // no ACKs: a flow is done when its last byte arrives, lost bytes stay lost
};

struct TransportConfig {
  AckMode acks = AckMode::kAuto;
  // No acknowledged progress for this long rewinds to the first unacknowledged packet. 1 ms is next
  // to the IB QP timeout 8 (4.096 µs·2^8 = 1.05 ms) and above the queueing of the shipped lossy runs;
  // a queue of more than 12.5 MB at 100 Gb/s outlasts it (docs/simulator.md).
  double retransmit_timeout_us = 1000;
};

enum class LossKind : uint8_t { kData, kAck };

// One packet lost on the first link it crosses, the first time it is sent: `psn` of flow `flow`
// (data: the packet with that sequence number; ack: the ACK that acknowledges up to it).
struct InjectedLoss {
  uint32_t flow = 0;
  uint32_t psn = 0;
  LossKind kind = LossKind::kData;
};

struct LossConfig {
  double rate = 0;  // every link, both directions: each packet (data, ACK, NAK, CNP) lost with this chance
  std::vector<InjectedLoss> drops;  // [[loss.drop]] entries
  bool any() const { return rate > 0 || !drops.empty(); }
};

struct OutputConfig {
  uint32_t max_rate_flows = 64;  // rates.csv holds the first this-many flows
  double jain_window_ms = 10;
  // utilization.csv / pauses.csv: at most this many samples per port (even; the sample width
  // doubles whenever a run outgrows it).
  uint32_t series_samples = 200;
};

struct Scenario {
  std::string name;
  uint64_t seed = 1;
  double duration_ms = 20;  // simulated time limit (poisson runs stop earlier when all flows end)
  double warmup_ms = 0;     // metrics ignore the time before this
  double sample_interval_us = 10;
  uint32_t mtu_bytes = 1000;   // payload per packet
  uint32_t header_bytes = 62;  // Ethernet+IP+UDP+BTH+ICRC+FCS on the wire
  uint32_t cnp_bytes = 64;
  bool progress = true;  // progress line on stderr for long runs
  TopologyConfig topology;
  SwitchConfig sw;
  TrafficConfig traffic;
  TransportConfig transport;
  LossConfig loss;
  OutputConfig output;
  bool cc_enabled = true;
  std::string cc_profile = "mlx5";
  cc::DcqcnParams dcqcn = cc::mlx5_profile();
};

// Reads a scenario file and applies overrides ("topology.senders=32"; the value is TOML, bare words
// are taken as strings). Throws std::runtime_error with the file, key and reason on any error.
Scenario load_scenario(const std::filesystem::path& path, const std::vector<std::string>& overrides = {});
// Parses scenario text; relative file paths resolve against `base_dir`.
Scenario parse_scenario(std::string_view text, const std::filesystem::path& base_dir,
                        const std::vector<std::string>& overrides = {},
                        const std::string& origin = "<scenario>");

}  // namespace rdmad::sim
