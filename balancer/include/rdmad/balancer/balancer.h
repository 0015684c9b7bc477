#pragma once
// The multi-NIC balancer: splits messages into chunks, picks a lane (NIC) per chunk by policy,
// tracks chunks in flight, learns each lane's throughput from completions, and fails lanes over
// and back. Pure logic: no I/O, no clock (every call takes `now_us`), no threads; one owner calls it.
//
// Picks are deterministic for the same inputs: the weighted policies use smooth weighted
// round-robin (nginx's algorithm), so a lane with weight w gets w/W of the chunks, evenly interleaved.
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "rdmad/balancer/balancer_config.h"

namespace rdmad::balancer {

/// One message to stripe.
struct Message {
  uint64_t tag = 0;
  uint64_t flow_id = 0;
  uint64_t bytes = 0;
  // Distance of the message's buffer to each NIC (indexed like the lanes); empty: all equal.
  std::span<const PciDistance> distance = {};
  // The lanes its flow is pinned to: chunks go only there while one of them is up, and to the
  // other lanes (a spill, counted) while all of them are down.
  LaneMask lanes = kEveryLane;
};

enum class PlanStatus : uint8_t {
  kOk,
  kNoLane,      // no lane is up: nothing was planned
  kNoResource,  // the in-flight table is full: nothing was planned, retry after completions
};

class Balancer {
 public:
  Balancer(BalancerConfig config, std::vector<NicSpec> nics);

  /// Splits `m` into chunks of config.chunk_bytes, assigns each a lane and records it in flight;
  /// appends the chunks to `out` (which the caller reuses, so steady state does not allocate).
  PlanStatus plan(const Message& m, uint64_t now_us, std::vector<Chunk>& out);

  /// The lane for one chunk of `flow_id`, without recording anything in flight; kNoNic when no
  /// lane is up. The policy chooses among the lanes in `lanes` that are up, or among every lane
  /// that is up when none of those is (O(lanes), no allocation).
  uint16_t pick(uint64_t flow_id, std::span<const PciDistance> distance, uint64_t now_us,
                LaneMask lanes = kEveryLane);

  /// A chunk completed successfully `duration_us` after it was posted: frees it and feeds the
  /// lane's throughput average. Unknown ids (already moved or completed) are ignored: returns false.
  bool complete(ChunkId id, uint64_t duration_us);

  /// A chunk that will not complete (its request failed, or it was never sent): frees it without
  /// a throughput sample. Unknown ids are ignored: returns false.
  bool cancel(ChunkId id);

  /// Congestion inputs of a lane for the congestion_aware policy: CNPs per second received by the
  /// lane's reaction point, and its current DCQCN rate (0: unknown, no cap).
  void set_congestion(uint16_t nic, double cnp_per_s, double dcqcn_rate_mbps);

  /// Why a lane goes down. kPath: its port or path failed (a failover: counted, and the lane
  /// rejoins after a back-off that grows while it flaps). kRequest: its QP went to the error
  /// state because the peer refused one request (remote access error, ...): the path is fine, so
  /// this is not a failover and the lane rejoins as soon as its QP is rebuilt.
  enum class Fault : uint8_t { kPath, kRequest };

  /// The lane's port went down or one of its QPs failed. Its in-flight chunks are re-assigned to
  /// the other lanes and returned for re-posting (nic == kNoNic, and no longer tracked, when no
  /// lane is left: re-post them later with repost()). A lane already down: no-op, empty result.
  /// A failover (counted) only when the lane was up: a recovering lane that fails carried nothing
  /// (counted in rejoins_failed), and its back-off keeps growing.
  std::vector<Chunk> mark_down(uint16_t nic, uint64_t now_us, std::string_view reason, Fault fault = Fault::kPath);

  /// The lane is healthy again: it rejoins once its back-off has passed (exponential per failure),
  /// at once when it went down for a kRequest fault.
  void mark_recovered(uint16_t nic, uint64_t now_us);

  /// Assigns a chunk that has no lane (see mark_down) to one and tracks it; false when none is up.
  bool repost(Chunk& chunk, uint64_t now_us);

  /// Rejoins lanes whose back-off has passed (plan and pick do this too). With
  /// config.check_path_before_rejoin, such a lane waits instead for path_checked().
  void tick(uint64_t now_us);

  /// check_path_before_rejoin: the lanes whose back-off has passed since the last call, each once
  /// per recovery; their owner checks each one's path, then calls path_checked() or, when the
  /// check failed, mark_down().
  std::vector<uint16_t> take_path_checks();
  /// The path of a recovering lane whose back-off has passed works: it rejoins at the next tick.
  void path_checked(uint16_t nic);
  /// check_path_before_rejoin: a lane that has carried nothing yet (its QPs just came up) is
  /// checked before its first chunk too. Until then it is recovering, but it holds its place: a
  /// flow pinned to it, or whose nearest NIC it is, waits for it (kNoNic) rather than going to
  /// another lane; it joins without being counted as a rejoin. No-op unless the lane is up and no
  /// chunk is in flight (meant for a balancer that has not planned yet).
  void check_first(uint16_t nic, uint64_t now_us);

  /// Called once per down / recovering / rejoined transition.
  void set_event_sink(std::function<void(const Event&)> sink) { sink_ = std::move(sink); }

  size_t lane_count() const { return lanes_.size(); }
  LaneState state(uint16_t nic) const { return lanes_[nic].state; }
  const LaneStats& stats(uint16_t nic) const { return lanes_[nic].stats; }
  const BalancerCounters& counters() const { return counters_; }
  const BalancerConfig& config() const { return config_; }
  std::string_view name(uint16_t nic) const { return lanes_[nic].spec.name; }
  /// The lane's share of chunks under the current weights, 0..1 (0 when down or left out).
  double weight(uint16_t nic) const;
  /// Earliest time a recovering lane rejoins (0 unless recovering).
  uint64_t rejoin_at_us(uint16_t nic) const { return lanes_[nic].rejoin_at_us; }
  size_t in_flight() const { return in_flight_; }

 private:
  struct Lane {
    NicSpec spec;
    LaneState state = LaneState::kUp;
    LaneStats stats;
    bool measured = false;
    double cnp_per_s = 0;
    double dcqcn_rate_mbps = 0;
    double current = 0;  // smooth weighted round-robin state
    uint64_t salt = 0;   // rendezvous hash salt (from the name: stable across restarts)
    uint64_t backoff_us = 0;
    uint64_t rejoin_at_us = 0;
    uint64_t up_since_us = 0;
    bool rejoined_once = false;
    bool request_fault = false;  // down for a kRequest fault: no back-off on recovery
    bool check_due = false;      // recovering, back-off over: its path check was asked for
    bool path_ok = false;        // recovering: its path was checked (or needs none)
    bool first_check = false;    // recovering only for its first check (check_first)
  };
  struct Slot {
    Chunk chunk;
    bool used = false;
  };

  // pick helpers (balancer_pick.cc)
  // The candidates of one pick: lanes up, in the mask, and of the nearest distance class among those.
  struct Candidates {
    std::span<const PciDistance> distance;
    PciDistance nearest = PciDistance::kCrossSocket;
    LaneMask lanes = kEveryLane;
  };
  LaneMask usable(LaneMask lanes) const;
  bool eligible(uint16_t i, const Candidates& c) const;
  PciDistance nearest_up(std::span<const PciDistance> distance, LaneMask lanes) const;
  uint16_t pick_weighted(const Candidates& c);
  uint16_t pick_round_robin(const Candidates& c);
  uint16_t pick_hash(uint64_t flow_id, const Candidates& c) const;
  void recompute_weights() const;

  bool track(Chunk& chunk);
  void assign(Chunk& chunk, uint16_t nic);
  void emit(Event e);

  BalancerConfig config_;
  std::vector<Lane> lanes_;
  mutable std::vector<double> weight_;  // base weight per lane, refreshed when inputs change
  mutable bool weights_dirty_ = true;
  std::vector<Slot> slots_;
  std::vector<ChunkId> free_;
  size_t in_flight_ = 0;
  uint64_t picks_ = 0;
  uint16_t rr_cursor_ = 0;
  uint16_t probe_cursor_ = 0;
  uint16_t recovering_ = 0;  // lanes waiting for their rejoin: tick() is free when 0
  std::vector<uint16_t> checks_due_;  // take_path_checks()
  BalancerCounters counters_;
  std::function<void(const Event&)> sink_;
};

}  // namespace rdmad::balancer
