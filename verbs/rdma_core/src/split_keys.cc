#include "split_keys.h"

#include <algorithm>

namespace rdmad::verbs::rdma_core {

size_t translate_sge(const SplitKeys& keys, uint64_t addr, uint32_t length, ibv_sge* out) {
  if (addr < keys.addr || keys.slice_bytes == 0) return 0;
  uint64_t offset = addr - keys.addr;
  if (offset > keys.length || length > keys.length - offset) return 0;
  size_t n = 0;
  uint64_t left = length;
  do {
    const size_t slice = offset / keys.slice_bytes;
    if (slice >= keys.count || n == kMaxSgePieces) return 0;
    const uint64_t room = (slice + 1) * keys.slice_bytes - offset;
    const uint64_t take = std::min(left, room);
    out[n++] = ibv_sge{keys.addr + offset, static_cast<uint32_t>(take), keys.lkeys[slice]};
    offset += take;
    left -= take;
  } while (left > 0);
  return n;
}

bool SplitKeyTable::add(const SplitKeys& keys) {
  std::lock_guard lock(write_mu_);
  for (Slot& s : slots_) {
    if (s.tag.load(std::memory_order_relaxed) != 0) continue;
    s.keys = keys;
    s.tag.store(kUsed | keys.lkeys[0], std::memory_order_release);
    live_.fetch_add(1, std::memory_order_release);
    return true;
  }
  return false;
}

void SplitKeyTable::remove(uint32_t lkey) {
  std::lock_guard lock(write_mu_);
  for (Slot& s : slots_) {
    if (s.tag.load(std::memory_order_relaxed) == (kUsed | lkey)) {
      s.tag.store(0, std::memory_order_release);
      live_.fetch_sub(1, std::memory_order_release);
      return;
    }
  }
}

const SplitKeys* SplitKeyTable::find_slow(uint32_t lkey) const {
  for (const Slot& s : slots_) {
    if (s.tag.load(std::memory_order_acquire) == (kUsed | lkey)) return &s.keys;
  }
  return nullptr;
}

}  // namespace rdmad::verbs::rdma_core
