#pragma once
// MRs a backend holds as several (rdma_core splits registrations over its per-MR limit, 3.5 GiB,
// into slices behind one handle): a peer that accesses such a range must use the rkey of the slice
// each byte is in, so exports and advertised receives carry every slice's rkey.
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "rdmad/verbs/device.h"

namespace rdmad::flow {

/// Slice k covers bytes [k·slice_bytes, (k+1)·slice_bytes) of the MR (the last one the rest);
/// rkeys has one key per slice, slice 0 first.
struct MrSlices {
  uint64_t slice_bytes = 0;
  std::vector<uint32_t> rkeys;
};

/// The slices of an MR, nullopt when the backend holds it as one MR (its rkey() covers it all).
/// The daemon reads them through rdma_core::region_slices(); tests pass their own.
using SliceReader = std::function<std::optional<MrSlices>(const verbs::MemoryRegion&)>;

}  // namespace rdmad::flow
