// Lane choice per chunk: the per-chunk hot path. No allocation; O(lanes) per pick.
#include <algorithm>

#include "mix.h"
#include "rdmad/balancer/balancer.h"

namespace rdmad::balancer {
namespace {

PciDistance distance_of(std::span<const PciDistance> distance, size_t i) {
  // A NIC the caller gave no distance for counts as the farthest.
  return i < distance.size() ? distance[i] : PciDistance::kCrossSocket;
}

}  // namespace

LaneMask Balancer::usable(LaneMask lanes) const {
  // A pinned flow keeps to its lanes while one of them is up (or waiting for its first path
  // check: it waits for that); with all of them down it spills over to the others rather than
  // fail (it returns once one of its own rejoins).
  if (lanes == kEveryLane) return lanes;
  for (size_t i = 0; i < lanes_.size() && i < 32; ++i) {
    if (lane_in(lanes, i) && (lanes_[i].state == LaneState::kUp || lanes_[i].first_check)) return lanes;
  }
  return kEveryLane;
}

PciDistance Balancer::nearest_up(std::span<const PciDistance> distance, LaneMask lanes) const {
  PciDistance nearest = PciDistance::kCrossSocket;
  if (!config_.honour_pci_distance || distance.empty()) return nearest;
  for (size_t i = 0; i < lanes_.size(); ++i) {
    const bool placed = lanes_[i].state == LaneState::kUp || lanes_[i].first_check;  // see usable()
    if (placed && lane_in(lanes, i)) nearest = std::min(nearest, distance_of(distance, i));
  }
  return nearest;
}

bool Balancer::eligible(uint16_t i, const Candidates& c) const {
  if (lanes_[i].state != LaneState::kUp || !lane_in(c.lanes, i)) return false;
  return !config_.honour_pci_distance || c.distance.empty() || distance_of(c.distance, i) == c.nearest;
}

void Balancer::recompute_weights() const {
  const bool measured_policy = config_.policy == Policy::kWeighted || config_.policy == Policy::kCongestionAware;
  // A lane without a measurement yet (new, or just rejoined) starts at the mean of the measured
  // ones: it gets a fair share and is measured by its own completions.
  double sum = 0;
  double max_rate = 0;
  int measured = 0;
  for (const Lane& l : lanes_) {
    if (l.state != LaneState::kUp) continue;
    if (l.measured) {
      sum += l.stats.throughput_bytes_per_s;
      ++measured;
    }
    max_rate = std::max(max_rate, l.dcqcn_rate_mbps);
  }
  const double unmeasured = measured > 0 ? sum / measured : 1.0;
  for (size_t i = 0; i < lanes_.size(); ++i) {
    const Lane& l = lanes_[i];
    double w = 0;
    if (l.state == LaneState::kUp) {
      w = measured_policy && l.measured ? l.stats.throughput_bytes_per_s : (measured_policy ? unmeasured : 1.0);
      if (config_.policy == Policy::kCongestionAware) {
        // CNPs say the path is congested now; the DCQCN rate says how far the reaction point has
        // already cut the lane relative to the fastest one.
        if (config_.cnp_half_weight_per_s > 0) w /= 1.0 + l.cnp_per_s / config_.cnp_half_weight_per_s;
        if (l.dcqcn_rate_mbps > 0 && max_rate > 0) w *= l.dcqcn_rate_mbps / max_rate;
      }
    }
    weight_[i] = w;
  }
  weights_dirty_ = false;
}

uint16_t Balancer::pick(uint64_t flow_id, std::span<const PciDistance> distance, uint64_t now_us, LaneMask lanes) {
  if (recovering_ > 0) tick(now_us);
  Candidates c{distance, PciDistance::kCrossSocket, usable(lanes)};
  c.nearest = nearest_up(distance, c.lanes);
  uint16_t nic = kNoNic;
  switch (config_.policy) {
    case Policy::kWeighted:
    case Policy::kCongestionAware: nic = pick_weighted(c); break;
    case Policy::kRoundRobin: nic = pick_round_robin(c); break;
    case Policy::kHash: nic = pick_hash(flow_id, c); break;
  }
  if (nic == kNoNic) {
    counters_.no_lane++;
  } else if (!lane_in(lanes, nic)) {
    counters_.spilled++;
  }
  return nic;
}

uint16_t Balancer::pick_weighted(const Candidates& c) {
  if (weights_dirty_) recompute_weights();
  const auto n = static_cast<uint16_t>(lanes_.size());
  double best = 0;
  for (uint16_t i = 0; i < n; ++i) {
    if (eligible(i, c)) best = std::max(best, weight_[i]);
  }
  if (best <= 0) return kNoNic;
  const double thresh = best * config_.min_lane_fraction;
  ++picks_;
  if (config_.probe_every_chunks > 0 && picks_ % config_.probe_every_chunks == 0) {
    for (uint16_t k = 1; k <= n; ++k) {
      const auto i = static_cast<uint16_t>((probe_cursor_ + k) % n);
      if (eligible(i, c) && weight_[i] < thresh) {
        probe_cursor_ = i;
        counters_.probes++;
        return i;
      }
    }
  }
  // Smooth weighted round-robin: every candidate gains its weight, the richest is picked and pays
  // the total. Over W picks a lane of weight w is picked w times, spread evenly.
  double total = 0;
  uint16_t chosen = kNoNic;
  for (uint16_t i = 0; i < n; ++i) {
    if (!eligible(i, c) || weight_[i] < thresh) continue;
    Lane& l = lanes_[i];
    l.current += weight_[i];
    total += weight_[i];
    if (chosen == kNoNic || l.current > lanes_[chosen].current) chosen = i;
  }
  lanes_[chosen].current -= total;
  return chosen;
}

uint16_t Balancer::pick_round_robin(const Candidates& c) {
  const auto n = static_cast<uint16_t>(lanes_.size());
  for (uint16_t k = 0; k < n; ++k) {
    const auto i = static_cast<uint16_t>((rr_cursor_ + k) % n);
    if (eligible(i, c)) {
      rr_cursor_ = static_cast<uint16_t>((i + 1) % n);
      return i;
    }
  }
  return kNoNic;
}

uint16_t Balancer::pick_hash(uint64_t flow_id, const Candidates& c) const {
  // Rendezvous (highest random weight) hashing: a flow moves only when its own lane goes away,
  // and comes back to it when the lane returns.
  uint16_t chosen = kNoNic;
  uint64_t best = 0;
  for (uint16_t i = 0; i < lanes_.size(); ++i) {
    if (!eligible(i, c)) continue;
    const uint64_t score = mix64(flow_id ^ lanes_[i].salt);
    if (chosen == kNoNic || score > best) {
      chosen = i;
      best = score;
    }
  }
  return chosen;
}

}  // namespace rdmad::balancer
