// Chunking, the in-flight table and throughput learning.
#include "rdmad/balancer/balancer.h"

#include <algorithm>
#include <stdexcept>

#include "mix.h"

namespace rdmad::balancer {
namespace {

// Chunk ids: slot index in the low bits, a generation in the high bits, so a stale id (a chunk
// already moved to another lane and its slot reused) is recognised and ignored.
constexpr uint32_t kSlotBits = 24;
constexpr uint32_t kSlotMask = (1u << kSlotBits) - 1;

}  // namespace

Balancer::Balancer(BalancerConfig config, std::vector<NicSpec> nics) : config_(std::move(config)) {
  if (nics.empty() || nics.size() >= kNoNic) throw std::invalid_argument("balancer: need 1..65534 lanes");
  if (config_.chunk_bytes == 0) throw std::invalid_argument("balancer: chunk_bytes must be > 0");
  if (config_.max_in_flight_chunks == 0 || config_.max_in_flight_chunks > kSlotMask) {
    throw std::invalid_argument("balancer: max_in_flight_chunks must be 1..16777215");
  }
  if (config_.rejoin_backoff_min_us == 0 || config_.rejoin_backoff_max_us < config_.rejoin_backoff_min_us) {
    throw std::invalid_argument("balancer: need 0 < rejoin_backoff_min_us <= rejoin_backoff_max_us");
  }
  for (NicSpec& n : nics) {
    Lane l;
    l.salt = name_hash(n.name);
    l.spec = std::move(n);
    l.backoff_us = config_.rejoin_backoff_min_us;
    lanes_.push_back(std::move(l));
  }
  weight_.assign(lanes_.size(), 0.0);
  slots_.resize(config_.max_in_flight_chunks);
  free_.reserve(slots_.size());
  for (size_t i = slots_.size(); i-- > 0;) {
    slots_[i].chunk.id = static_cast<ChunkId>(i);
    free_.push_back(static_cast<ChunkId>(i));
  }
}

PlanStatus Balancer::plan(const Message& m, uint64_t now_us, std::vector<Chunk>& out) {
  const uint64_t n = (m.bytes + config_.chunk_bytes - 1) / config_.chunk_bytes;
  if (n > free_.size()) return PlanStatus::kNoResource;
  for (uint64_t k = 0; k < n; ++k) {
    const uint16_t nic = pick(m.flow_id, m.distance, now_us, m.lanes);
    if (nic == kNoNic) return PlanStatus::kNoLane;  // only possible on the first chunk: nothing changes mid-plan
    Chunk c;
    c.tag = m.tag;
    c.flow_id = m.flow_id;
    c.lanes = m.lanes;
    c.offset = k * config_.chunk_bytes;
    c.bytes = static_cast<uint32_t>(std::min<uint64_t>(config_.chunk_bytes, m.bytes - c.offset));
    assign(c, nic);
    out.push_back(c);
  }
  counters_.chunks_planned += n;
  return PlanStatus::kOk;
}

void Balancer::assign(Chunk& chunk, uint16_t nic) {
  chunk.nic = nic;
  lanes_[nic].stats.chunks_assigned++;
  lanes_[nic].stats.bytes_assigned += chunk.bytes;
  track(chunk);
}

bool Balancer::track(Chunk& chunk) {
  const ChunkId slot = free_.back();
  free_.pop_back();
  Slot& s = slots_[slot];
  // Next generation of this slot.
  chunk.id = (((s.chunk.id >> kSlotBits) + 1) << kSlotBits) | slot;
  s.chunk = chunk;
  s.used = true;
  ++in_flight_;
  return true;
}

bool Balancer::cancel(ChunkId id) {
  const uint32_t slot = id & kSlotMask;
  if (slot >= slots_.size()) return false;
  Slot& s = slots_[slot];
  if (!s.used || s.chunk.id != id) return false;
  s.used = false;
  free_.push_back(slot);
  --in_flight_;
  return true;
}

bool Balancer::complete(ChunkId id, uint64_t duration_us) {
  if (!cancel(id)) return false;
  const Slot& s = slots_[id & kSlotMask];
  Lane& lane = lanes_[s.chunk.nic];
  lane.stats.chunks_completed++;
  lane.stats.bytes_completed += s.chunk.bytes;
  if (lane.state == LaneState::kUp && s.chunk.bytes > 0) {
    const double sample = static_cast<double>(s.chunk.bytes) * 1e6 / static_cast<double>(std::max<uint64_t>(duration_us, 1));
    double& t = lane.stats.throughput_bytes_per_s;
    t = lane.measured ? t + config_.ewma_weight * (sample - t) : sample;
    lane.measured = true;
    weights_dirty_ = true;
  }
  return true;
}

void Balancer::set_congestion(uint16_t nic, double cnp_per_s, double dcqcn_rate_mbps) {
  lanes_[nic].cnp_per_s = std::max(0.0, cnp_per_s);
  lanes_[nic].dcqcn_rate_mbps = std::max(0.0, dcqcn_rate_mbps);
  weights_dirty_ = true;
}

double Balancer::weight(uint16_t nic) const {
  if (weights_dirty_) recompute_weights();
  double best = 0;
  for (double w : weight_) best = std::max(best, w);
  const double thresh = best * config_.min_lane_fraction;
  double total = 0;
  for (size_t i = 0; i < lanes_.size(); ++i) {
    if (lanes_[i].state == LaneState::kUp && weight_[i] >= thresh) total += weight_[i];
  }
  if (lanes_[nic].state != LaneState::kUp || weight_[nic] < thresh || total <= 0) return 0;
  return weight_[nic] / total;
}

void Balancer::emit(Event e) {
  if (sink_) sink_(e);
}

}  // namespace rdmad::balancer
