#pragma once
// A simulation scenario: every knob of a run, read from a TOML file plus `--set key=value`
// overrides. The key reference lives in docs/simulator.md; unknown keys are errors.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rdmad/cc/dcqcn_params.h"

namespace rdmad::sim {

enum class TopologyKind : uint8_t { kStar, kDumbbell, kLeafSpine, kFatTree, kRail, kCustom };
enum class TrafficKind : uint8_t { kLongFlows, kIncast, kPoisson };

// Where an entry of a list ([[topology.node]], [[topology.link]], [[traffic.source]]) was written:
// "file:line" of the entry and of each key in it, so errors found once the topology is built (an
// unknown node name, a link that does not fit) still name the file, line and key.
struct Located {
  std::string at;                                           // the entry's "file:line"
  std::vector<std::pair<std::string, std::string>> key_at;  // key → "file:line"
  // "file:line" of `key` in the entry, or of the entry when the key is not in it.
  const std::string& where(const std::string& key) const;
};

// One [[topology.node]]: a host (its NICs are its endpoints) or a switch. With `count`, that many
// nodes named name0 … name{count-1}.
struct NodeDef {
  std::string name;
  bool host = true;
  uint32_t count = 0;         // 0: one node called `name`
  uint32_t nics = 1;          // hosts: NICs, "name.nic0" … when more than one
  uint64_t buffer_bytes = 0;  // switches: shared buffer; 0 = switch.buffer_bytes
  Located loc;
};

// One [[topology.link]] between `a` and `b` (names, or ranges "host0..host7": a range against one
// node links each to it, two ranges of equal length pair up). A pair already linked (by a
// generator or an earlier entry) takes the keys given; unset keys keep the link's values or the
// topology's defaults.
struct LinkDef {
  std::string a;
  std::string b;
  std::optional<double> gbps;
  std::optional<int64_t> delay_ns;
  // Per switch ingress port at either end of the link: PFC headroom and static Xoff/Xon (bytes).
  std::optional<uint64_t> headroom_bytes;
  std::optional<uint64_t> pfc_xoff_bytes;
  std::optional<uint64_t> pfc_xon_bytes;
  Located loc;
};

struct TopologyConfig {
  TopologyKind kind = TopologyKind::kStar;
  uint32_t senders = 8;  // star / dumbbell: sending hosts (dumbbell: as many receivers)
  uint32_t leaves = 4;   // leaf-spine
  uint32_t spines = 4;   // leaf-spine, rail
  uint32_t hosts_per_leaf = 8;
  uint32_t fat_tree_k = 4;       // k-ary fat-tree: k^3/4 hosts
  uint32_t hosts = 16;           // rail: hosts
  uint32_t rails = 8;            // rail: NICs per host, one leaf (or leaves_per_rail) per rail
  uint32_t leaves_per_rail = 1;  // rail: leaves per rail, each serving hosts/leaves_per_rail hosts
  double host_link_gbps = 100;
  double fabric_link_gbps = 100;      // switch-to-switch links (dumbbell: the bottleneck)
  int64_t link_delay_ns = 1000;       // propagation delay of every link, unless one of these is set:
  int64_t host_link_delay_ns = -1;    // links to hosts (-1: link_delay_ns)
  int64_t fabric_link_delay_ns = -1;  // switch-to-switch links (-1: link_delay_ns)
  std::vector<NodeDef> nodes;         // [[topology.node]]
  std::vector<LinkDef> links;         // [[topology.link]]
  // Ports whose egress queues are the summary's bottleneck ("sw0->host3"); empty = the kind's own
  // (custom: every switch port facing a host).
  std::vector<std::string> bottlenecks;
  std::string bottlenecks_at;
  int64_t host_delay() const { return host_link_delay_ns >= 0 ? host_link_delay_ns : link_delay_ns; }
  int64_t fabric_delay() const { return fabric_link_delay_ns >= 0 ? fabric_link_delay_ns : link_delay_ns; }
};

struct SwitchConfig {
  uint64_t buffer_bytes = 32ull << 20;  // shared packet buffer per switch
  double dt_alpha = 1.0;                // dynamic threshold: a queue may hold alpha·(free shared buffer)
  bool pfc = true;
  double pfc_alpha = 1.0 / 8;     // Xoff when an ingress holds more than pfc_alpha·(free shared)
  uint64_t headroom_bytes = 0;    // per ingress port beyond Xoff; 0 = 2·BDP of the link + 3 frames
  uint64_t xon_offset_bytes = 0;  // Xon this far below Xoff; 0 = 2 MTU
  // Static PFC thresholds per ingress port (as switches and htsim set them), instead of the dynamic
  // pfc_alpha one: Xoff when the ingress holds more than pfc_xoff_bytes (what is above it is its
  // headroom), Xon when it holds pfc_xon_bytes or less. 0 = dynamic; pfc_xon_bytes 0 with a static
  // Xoff = Xoff − xon_offset_bytes. [[topology.link]] sets them per port.
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

enum class SourceKind : uint8_t { kFlows, kList, kIncast, kPoisson, kAllReduce, kAllToAll };
enum class CollectiveAlgorithm : uint8_t { kRing, kHalvingDoubling };

// One line of a `list` source: a flow between two named NICs.
struct ListedFlow {
  std::string src;
  std::string dst;
  uint64_t size_bytes = 0;
  double start_us = 0;
  std::string at;  // "file:line" (TOML entry or CSV line)
};

// One [[traffic.source]]. Host names: a NIC ("host3", "host3.nic1"), a range ("host0..host7"), or
// "all"; collectives and Poisson take host names (a multi-NIC host stands for all its NICs).
struct TrafficSource {
  SourceKind kind = SourceKind::kFlows;
  std::string name;  // collectives: the label in summary.json (default: kind and index)
  std::vector<std::string> src;
  std::vector<std::string> dst;
  std::vector<std::string> hosts;  // poisson, collectives (default "all")
  uint64_t size_bytes = 0;         // flows: 0 = until the end; incast: per sender; allreduce: per rank;
                                   // alltoall: per pair of ranks
  double start_us = 0;
  double stagger_us = 0;            // flows: flow i starts at start + i·stagger
  std::vector<double> at_us;        // incast: burst times (else start_us + k·burst_interval_us)
  uint32_t bursts = 1;              // incast
  double burst_interval_us = 1000;  // incast
  double load = 0;                  // poisson: offered load per host link
  std::filesystem::path cdf;        // poisson
  uint32_t flow_count = 0;          // poisson
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  std::vector<ListedFlow> flows;  // list: inline entries and the lines of `file`
  Located loc;
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
  // [[traffic.source]]: any number of sources, mixed. When set, the single source above is unused.
  std::vector<TrafficSource> sources;
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
