#pragma once
// Large registrations are split into several MRs behind one handle: single mlx5 MRs above ~4 GiB
// were measured ~45% slower, slices of at most 3.5 GiB were not. Pure planning; the backend registers
// one MR per slice and maps a (offset, length) of the whole onto slices.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace rdmad::verbs::rdma_core {

inline constexpr uint64_t kMaxMrSliceBytes = 3584ULL << 20;  // 3.5 GiB, a multiple of every page size

struct MrSlice {
  uint64_t offset = 0;  // from the start of the registration
  uint64_t length = 0;
  bool operator==(const MrSlice&) const = default;
};

// Slices covering [0, length): all `max_slice` long except a shorter last one. `max_slice` must be
// non-zero; round it to the page size before calling. Empty for length 0.
std::vector<MrSlice> plan_mr_slices(uint64_t length, uint64_t max_slice = kMaxMrSliceBytes);

// One piece of a range after cutting it at slice boundaries.
struct MrPiece {
  size_t slice = 0;           // index into the plan
  uint64_t slice_offset = 0;  // offset inside that slice
  uint64_t length = 0;
  bool operator==(const MrPiece&) const = default;
};

// The slice holding all of [offset, offset + length), or nullopt when the range crosses a boundary or
// leaves the registration.
std::optional<size_t> find_slice(std::span<const MrSlice> plan, uint64_t offset, uint64_t length);
// Cuts [offset, offset + length) at slice boundaries (one scatter-gather entry per piece); empty when
// the range leaves the registration.
std::vector<MrPiece> split_range(std::span<const MrSlice> plan, uint64_t offset, uint64_t length);

}  // namespace rdmad::verbs::rdma_core
