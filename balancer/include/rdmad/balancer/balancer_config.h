#pragma once
// Plain parameters and value types of the multi-NIC balancer. Units are in every name; time is
// microseconds on a caller-supplied clock.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rdmad::balancer {

/// How chunks are spread over the lanes (NICs).
enum class Policy : uint8_t {
  kWeighted,         // in proportion to each lane's measured throughput (default)
  kCongestionAware,  // measured throughput lowered by the lane's CNP rate and capped by its DCQCN rate
  kRoundRobin,       // one chunk per lane in turn
  kHash,             // a flow pinned to one lane (rendezvous hash of the flow id)
};

/// "weighted", "congestion_aware", "round_robin", "hash".
std::string_view to_string(Policy policy);
/// Inverse of to_string; nullopt for an unknown name.
std::optional<Policy> parse_policy(std::string_view name);

/// Distance between a buffer (GPU or host memory) and a NIC in the PCI tree, NCCL's classes:
/// nearer is smaller. A far NIC striped together with a near one slows both down (PLATFORM.md).
enum class PciDistance : uint8_t { kSameSwitch = 0, kHostBridge = 1, kCrossSocket = 2 };

struct BalancerConfig {
  Policy policy = Policy::kWeighted;
  uint32_t chunk_bytes = 1u << 20;  // a message is split into chunks of this size (the last may be shorter)
  double ewma_weight = 0.125;       // weight of a new throughput sample in the running average
  double min_lane_fraction = 0.25;  // lanes slower than this fraction of the best are left out (UCX's rule)
  // A left-out lane still gets one chunk in this many so its throughput is measured again (0: never).
  uint32_t probe_every_chunks = 256;
  bool honour_pci_distance = true;     // use only the nearest NICs to the buffer that are up
  double cnp_half_weight_per_s = 1000;  // congestion_aware: the CNP rate that halves a lane's weight
  uint64_t rejoin_backoff_min_us = 100'000;     // first wait between recovery and rejoin
  uint64_t rejoin_backoff_max_us = 10'000'000;  // the wait doubles per failure up to this
  uint64_t rejoin_stable_us = 30'000'000;       // up this long after a rejoin: the wait resets to min
  // A recovering lane past its back-off takes no chunks until its owner has checked the path
  // (take_path_checks, path_checked): a path still broken then costs no chunk a retry timeout.
  bool check_path_before_rejoin = false;
  uint32_t max_in_flight_chunks = 65536;        // size of the in-flight table (allocated once)
};

/// One lane: a local NIC (or NIC pair) chunks can be posted on.
struct NicSpec {
  std::string name;
};

inline constexpr uint16_t kNoNic = 0xFFFF;
using ChunkId = uint32_t;

/// Lanes a flow is pinned to: bit i is lane i (the client's nic_mask, so lanes 32 and above are
/// only reachable unpinned). kEveryLane (0): not pinned, every lane.
using LaneMask = uint32_t;
inline constexpr LaneMask kEveryLane = 0;
constexpr bool lane_in(LaneMask lanes, size_t lane) {
  return lanes == kEveryLane || (lane < 32 && ((lanes >> lane) & 1u) != 0);
}

/// One piece of a message, posted on one NIC.
struct Chunk {
  uint64_t tag = 0;      // the caller's id of the message
  uint64_t flow_id = 0;
  uint64_t offset = 0;   // bytes from the start of the message
  uint32_t bytes = 0;
  ChunkId id = 0;        // handle for complete(); valid while in flight
  uint16_t nic = kNoNic;
  LaneMask lanes = kEveryLane;  // its flow's lanes: a failover re-posts it there while one is up
};
static_assert(sizeof(Chunk) <= 40, "Chunk is copied per chunk on the hot path");

enum class LaneState : uint8_t {
  kUp,
  kDown,        // port down or QP failure; gets no chunks
  kRecovering,  // healthy again, waiting for its back-off to end (and for its path check)
};

enum class EventKind : uint8_t { kDown, kRecovering, kRejoined };

/// A failover or rejoin, reported once when it happens.
struct Event {
  EventKind kind = EventKind::kDown;
  uint16_t nic = 0;
  uint64_t at_us = 0;
  uint32_t chunks_moved = 0;  // kDown: in-flight chunks handed back for re-posting
  uint64_t backoff_us = 0;    // kRecovering: wait before the rejoin
  std::string reason;         // kDown: why ("port down", "qp failure: retry exceeded", ...)
};

/// Per-lane counters for the exporter (plain numbers, read at scrape time).
struct LaneStats {
  uint64_t chunks_assigned = 0;  // including re-posts onto this lane
  uint64_t bytes_assigned = 0;
  uint64_t chunks_completed = 0;
  uint64_t bytes_completed = 0;
  uint64_t chunks_moved_away = 0;  // in flight when the lane went down
  uint64_t failovers = 0;          // times the lane went down while up (a path fault)
  uint64_t rejoins = 0;
  uint64_t rejoins_failed = 0;     // times it went down again while recovering (before it rejoined)
  double throughput_bytes_per_s = 0;  // measured (EWMA); 0 until the first completion
};

struct BalancerCounters {
  uint64_t chunks_planned = 0;
  uint64_t chunks_reposted = 0;
  uint64_t probes = 0;  // chunks sent on a left-out lane to measure it again
  uint64_t failovers = 0;
  uint64_t rejoins = 0;
  uint64_t rejoins_failed = 0;
  uint64_t no_lane = 0;  // picks that found no lane up
  uint64_t spilled = 0;  // picks for a pinned flow outside its lanes (every one of them was down)
};

}  // namespace rdmad::balancer
