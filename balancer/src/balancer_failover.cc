// Failover (a lane's in-flight chunks go to the others) and rejoin with exponential back-off.
// Control-plane rate: may allocate and scan the in-flight table.
#include <algorithm>
#include <string>

#include "rdmad/balancer/balancer.h"

namespace rdmad::balancer {

std::vector<Chunk> Balancer::mark_down(uint16_t nic, uint64_t now_us, std::string_view reason, Fault fault) {
  Lane& lane = lanes_[nic];
  if (lane.state == LaneState::kDown) return {};
  if (lane.state == LaneState::kRecovering) --recovering_;
  // A lane that stayed up long enough since it (re)joined starts over at the shortest back-off;
  // a flapping one keeps the longer one it earned.
  if (lane.state == LaneState::kUp && now_us - lane.up_since_us >= config_.rejoin_stable_us) {
    lane.backoff_us = config_.rejoin_backoff_min_us;
  }
  const bool was_up = lane.state == LaneState::kUp;
  lane.state = LaneState::kDown;
  lane.request_fault = fault == Fault::kRequest;
  lane.check_due = false;
  lane.path_ok = false;
  lane.first_check = false;
  if (!was_up) {
    // It was recovering: nothing was on it, so nothing fails over; the rejoin failed.
    lane.stats.rejoins_failed++;
    counters_.rejoins_failed++;
  } else if (!lane.request_fault) {
    lane.stats.failovers++;
    counters_.failovers++;
  }
  weights_dirty_ = true;

  std::vector<Chunk> moved;
  for (size_t s = 0; s < slots_.size(); ++s) {
    Slot& slot = slots_[s];
    if (!slot.used || slot.chunk.nic != nic) continue;
    slot.used = false;
    free_.push_back(static_cast<ChunkId>(s));
    --in_flight_;
    moved.push_back(slot.chunk);
  }
  // Re-post in message order so the receiver sees the lowest offsets first.
  std::sort(moved.begin(), moved.end(),
            [](const Chunk& a, const Chunk& b) { return a.tag != b.tag ? a.tag < b.tag : a.offset < b.offset; });
  lane.stats.chunks_moved_away += moved.size();
  for (Chunk& c : moved) repost(c, now_us);

  Event e;
  e.kind = EventKind::kDown;
  e.nic = nic;
  e.at_us = now_us;
  e.chunks_moved = static_cast<uint32_t>(moved.size());
  e.reason = std::string(reason);
  emit(std::move(e));
  return moved;
}

bool Balancer::repost(Chunk& chunk, uint64_t now_us) {
  const uint16_t nic = free_.empty() ? kNoNic : pick(chunk.flow_id, {}, now_us, chunk.lanes);
  if (nic == kNoNic) {
    chunk.nic = kNoNic;
    return false;
  }
  assign(chunk, nic);
  counters_.chunks_reposted++;
  return true;
}

void Balancer::mark_recovered(uint16_t nic, uint64_t now_us) {
  Lane& lane = lanes_[nic];
  if (lane.state != LaneState::kDown) return;
  lane.state = LaneState::kRecovering;
  ++recovering_;
  // After a request fault the path never failed: rejoin at the next tick, and the back-off a
  // flapping path earned stays as it was.
  const uint64_t backoff = lane.request_fault ? 0 : lane.backoff_us;
  lane.rejoin_at_us = now_us + backoff;
  Event e;
  e.kind = EventKind::kRecovering;
  e.nic = nic;
  e.at_us = now_us;
  e.backoff_us = backoff;
  if (!lane.request_fault) lane.backoff_us = std::min(config_.rejoin_backoff_max_us, lane.backoff_us * 2);
  // A refused request said nothing about the path: no check.
  lane.path_ok = !config_.check_path_before_rejoin || lane.request_fault;
  lane.check_due = false;
  lane.request_fault = false;
  emit(std::move(e));
}

void Balancer::tick(uint64_t now_us) {
  if (recovering_ == 0) return;
  for (uint16_t i = 0; i < lanes_.size(); ++i) {
    Lane& lane = lanes_[i];
    if (lane.state != LaneState::kRecovering || now_us < lane.rejoin_at_us) continue;
    if (!lane.path_ok) {
      if (!lane.check_due) {
        lane.check_due = true;
        checks_due_.push_back(i);
      }
      continue;
    }
    lane.check_due = false;
    lane.path_ok = false;
    lane.state = LaneState::kUp;
    --recovering_;
    lane.up_since_us = now_us;
    lane.rejoin_at_us = 0;
    weights_dirty_ = true;
    if (lane.first_check) {  // joined for the first time: no rejoin to report
      lane.first_check = false;
      continue;
    }
    lane.measured = false;  // measured afresh: the path may not be what it was
    lane.stats.throughput_bytes_per_s = 0;
    lane.current = 0;
    lane.stats.rejoins++;
    counters_.rejoins++;
    weights_dirty_ = true;
    Event e;
    e.kind = EventKind::kRejoined;
    e.nic = i;
    e.at_us = now_us;
    emit(std::move(e));
  }
}

std::vector<uint16_t> Balancer::take_path_checks() {
  if (checks_due_.empty()) return {};  // every pass of the owner's loop asks
  std::vector<uint16_t> due;
  due.swap(checks_due_);
  // A lane that went down again since it was listed is checked after its next back-off (and may
  // be listed twice if that one has passed too).
  std::erase_if(due, [&](uint16_t i) { return !lanes_[i].check_due; });
  std::sort(due.begin(), due.end());
  due.erase(std::unique(due.begin(), due.end()), due.end());
  return due;
}

void Balancer::check_first(uint16_t nic, uint64_t now_us) {
  Lane& lane = lanes_[nic];
  // Called before the balancer's first chunk (the session just started): nothing can be on it.
  if (!config_.check_path_before_rejoin || lane.state != LaneState::kUp || in_flight_ > 0) return;
  lane.state = LaneState::kRecovering;
  ++recovering_;
  lane.rejoin_at_us = now_us;
  lane.path_ok = false;
  lane.check_due = false;
  lane.first_check = true;
  weights_dirty_ = true;
}

void Balancer::path_checked(uint16_t nic) {
  Lane& lane = lanes_[nic];
  if (lane.state == LaneState::kRecovering && lane.check_due) lane.path_ok = true;
}

}  // namespace rdmad::balancer
