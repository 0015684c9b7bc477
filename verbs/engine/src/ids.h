#pragma once
// Memory-region keys and QP numbers of an engine NIC. Both hold the index of their table entry (so
// a packet finds its region or QP in O(1)) and fill every other bit from a CSPRNG: a peer that
// knows one key or QPN learns nothing about the others (the sequential numbering before let a peer
// compute a neighbouring region's rkey from its own). The entry's full value is compared on every
// lookup, so a guess must match all 32 (key) or 24 (QPN) bits.
#include <bit>
#include <cstddef>
#include <cstdint>

namespace rdmad::verbs::engine {

inline constexpr uint32_t kMaxMrs = 1u << 16;  // client registrations, and per peer: exports, receives, flows' MRs
static_assert((kMaxMrs & (kMaxMrs - 1)) == 0, "table index = low bits");
// The QP table's size is the `max_qps` option: a power of two up to this.
inline constexpr uint32_t kMaxQpsLimit = 1u << 16;
inline constexpr uint32_t kMinQps = 64;

// Key: low 16 bits the MR table index (never 0, so key 0 is never valid), high 16 bits random.
inline constexpr uint32_t mr_index(uint32_t key) { return key & (kMaxMrs - 1); }
inline constexpr uint32_t mr_key(uint32_t index, uint32_t random) { return (random & ~(kMaxMrs - 1)) | index; }

// QPN (24 bits): the low log2(max_qps) bits are the QP table index, the rest random (14 bits at
// 1024 QPs, 8 at 65536). 0 and 1 (the special QPs) and 0xFFFFFF (multicast) are never handed out.
inline constexpr uint32_t kQpnMask = 0xFFFFFF;
class QpNumbering {
 public:
  /// `table` is a power of two in [kMinQps, kMaxQpsLimit].
  explicit constexpr QpNumbering(uint32_t table) : mask_(table - 1) {}
  constexpr uint32_t table() const { return mask_ + 1; }
  constexpr uint32_t index_mask() const { return mask_; }
  constexpr uint32_t index(uint32_t qpn) const { return qpn & mask_; }
  constexpr uint32_t make(uint32_t index, uint32_t random) const { return (random & kQpnMask & ~mask_) | index; }
  /// Random bits a QPN carries beside its index.
  constexpr int random_bits() const { return 24 - std::countr_zero(table()); }

 private:
  uint32_t mask_;
};
inline constexpr bool usable_qpn(uint32_t qpn) { return qpn > 1 && qpn < kQpnMask; }

/// Fills `out` from the kernel's CSPRNG (getrandom); false with errno set when it cannot.
/// Control path only: it may block until the pool is initialised at boot.
bool random_bytes(void* out, size_t n);

}  // namespace rdmad::verbs::engine
