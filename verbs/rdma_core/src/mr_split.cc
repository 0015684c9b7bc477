#include "mr_split.h"

#include <algorithm>

namespace rdmad::verbs::rdma_core {

std::vector<MrSlice> plan_mr_slices(uint64_t length, uint64_t max_slice) {
  std::vector<MrSlice> out;
  if (max_slice == 0) return out;
  for (uint64_t off = 0; off < length; off += max_slice)
    out.push_back({off, std::min(max_slice, length - off)});
  return out;
}

namespace {

uint64_t total(std::span<const MrSlice> plan) {
  return plan.empty() ? 0 : plan.back().offset + plan.back().length;
}

bool inside(std::span<const MrSlice> plan, uint64_t offset, uint64_t length) {
  const uint64_t end = total(plan);
  return offset <= end && length <= end - offset;
}

size_t slice_of(std::span<const MrSlice> plan, uint64_t offset) {
  const auto it = std::upper_bound(plan.begin(), plan.end(), offset,
                                   [](uint64_t off, const MrSlice& s) { return off < s.offset; });
  return static_cast<size_t>(it - plan.begin()) - 1;
}

}  // namespace

std::optional<size_t> find_slice(std::span<const MrSlice> plan, uint64_t offset, uint64_t length) {
  if (plan.empty() || length == 0 || !inside(plan, offset, length) || offset == total(plan))
    return std::nullopt;
  const size_t i = slice_of(plan, offset);
  if (offset + length > plan[i].offset + plan[i].length) return std::nullopt;
  return i;
}

std::vector<MrPiece> split_range(std::span<const MrSlice> plan, uint64_t offset, uint64_t length) {
  std::vector<MrPiece> out;
  if (plan.empty() || length == 0 || !inside(plan, offset, length)) return out;
  for (size_t i = slice_of(plan, offset); length > 0; ++i) {
    const uint64_t in_slice = offset - plan[i].offset;
    const uint64_t n = std::min(length, plan[i].length - in_slice);
    out.push_back({i, in_slice, n});
    offset += n;
    length -= n;
  }
  return out;
}

}  // namespace rdmad::verbs::rdma_core
