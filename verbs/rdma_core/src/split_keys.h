#pragma once
// Keys of a registration split into several MRs (mr_split.h) behind one MemoryRegion handle.
//
// Contract of a split region (documented in docs/verbs.md):
// - lkey() is slice 0's lkey. Every SGE carrying that lkey is translated by the backend at post time:
//   the address picks the slice, and an SGE that crosses slice boundaries becomes one ibv_sge per
//   slice (at most kMaxSgePieces). Local use of a split region is therefore transparent.
// - rkey() is slice 0's rkey and covers the first slice only (kMaxMrSliceBytes). A peer that accesses
//   beyond it needs the per-slice rkeys (rdma_core::region_slices()): rkeys are chosen by the NIC and
//   cannot be derived, and the requester side, not this one, builds the wire packets.
#include <infiniband/verbs.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "mr_split.h"
#include "rdmad/verbs/device.h"

namespace rdmad::verbs::rdma_core {

inline constexpr size_t kMaxSlices = 64;    // 224 GiB per registration
inline constexpr size_t kMaxSgePieces = 3;  // a 4 GiB SGE touches at most three 3.5 GiB slices

struct SplitKeys {
  uint64_t addr = 0;  // start of the whole registration
  uint64_t length = 0;
  uint64_t slice_bytes = kMaxMrSliceBytes;
  size_t count = 0;
  std::array<uint32_t, kMaxSlices> lkeys{};
  std::array<uint32_t, kMaxSlices> rkeys{};
};

/// Cuts [addr, addr+length) into ibv_sges with the slice lkeys. Returns how many were written, 0 when
/// the range leaves the registration (the WR is then posted unchanged and the NIC reports the
/// protection error, as for any bad lkey).
size_t translate_sge(const SplitKeys& keys, uint64_t addr, uint32_t length, ibv_sge* out);

/// The split regions of one PD, found by their slice-0 lkey. Readers (the posting threads) take no
/// lock: a slot's fields are written before its key is published with release order, and removed by
/// clearing the key before the MRs are deregistered. Writers (registration) serialize on a mutex.
class SplitKeyTable {
 public:
  static constexpr size_t kCapacity = 32;

  /// False when the table is full.
  bool add(const SplitKeys& keys);
  void remove(uint32_t lkey);
  /// The region whose slice-0 lkey is `lkey`, or nullptr. One relaxed load when no region is split.
  const SplitKeys* find(uint32_t lkey) const {
    if (live_.load(std::memory_order_acquire) == 0) return nullptr;
    return find_slow(lkey);
  }

 private:
  static constexpr uint64_t kUsed = 1ULL << 32;
  struct Slot {
    std::atomic<uint64_t> tag{0};  // kUsed | lkey when published
    SplitKeys keys;
  };
  const SplitKeys* find_slow(uint32_t lkey) const;

  std::array<Slot, kCapacity> slots_;
  std::atomic<uint32_t> live_{0};
  std::mutex write_mu_;
};

/// The slice keys of a region registered by this backend (null for another backend's region). A
/// region of at most kMaxMrSliceBytes has one slice; larger ones several. Outside the backend the
/// same is MemoryRegion::remote_slices().
const SplitKeys* region_slices(const verbs::MemoryRegion& mr);

}  // namespace rdmad::verbs::rdma_core
