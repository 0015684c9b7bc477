#pragma once
// Memory-region keys and QP numbers of a soft NIC. Both hold the index of their table entry (so a
// packet finds its region or QP in O(1)) and fill every other bit from a CSPRNG: a peer that knows
// one key or QPN learns nothing about the others (the sequential numbering before let a peer
// compute a neighbouring region's rkey from its own). The entry's full value is compared on every
// lookup, so a guess must match all 32 (key) or 24 (QPN) bits.
#include <cstddef>
#include <cstdint>

namespace rdmad::verbs::soft {

inline constexpr uint32_t kMaxQps = 1024;
inline constexpr uint32_t kMaxMrs = 1u << 16;  // client registrations, and per peer: exports, receives, flows' MRs
static_assert((kMaxQps & (kMaxQps - 1)) == 0 && (kMaxMrs & (kMaxMrs - 1)) == 0, "table index = low bits");

// Key: low 16 bits the MR table index (never 0, so key 0 is never valid), high 16 bits random.
inline constexpr uint32_t mr_index(uint32_t key) { return key & (kMaxMrs - 1); }
inline constexpr uint32_t mr_key(uint32_t index, uint32_t random) { return (random & ~(kMaxMrs - 1)) | index; }

// QPN (24 bits): low 10 bits the QP table index, high 14 bits random. 0 and 1 (the special QPs)
// and 0xFFFFFF (multicast) are never handed out.
inline constexpr uint32_t kQpnMask = 0xFFFFFF;
inline constexpr uint32_t qp_index(uint32_t qpn) { return qpn & (kMaxQps - 1); }
inline constexpr uint32_t make_qpn(uint32_t index, uint32_t random) {
  return (random & kQpnMask & ~(kMaxQps - 1)) | index;
}
inline constexpr bool usable_qpn(uint32_t qpn) { return qpn > 1 && qpn < kQpnMask; }

/// Fills `out` from the kernel's CSPRNG (getrandom); false with errno set when it cannot.
/// Control path only: it may block until the pool is initialised at boot.
bool random_bytes(void* out, size_t n);

}  // namespace rdmad::verbs::soft
