#pragma once
// CRC-32 with the Ethernet/zlib polynomial (reflected 0xEDB88320). Bit-identical to zlib's crc32():
// crc32_update(0, ...) == crc32(0, ...). Long inputs use carry-less-multiply folding (PCLMULQDQ, or
// VPCLMULQDQ with AVX-512) when the CPU has it, chosen once at run time; short inputs and other
// CPUs use slicing-by-8. See crc32_impl.h.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace rdmad::roce {

// Continues a CRC-32 over `data`; start with crc = 0. Pre/post inversion is handled inside, so
// crc32_update(crc32_update(0, a), b) == crc32_update(0, a ++ b).
uint32_t crc32_update(uint32_t crc, std::span<const uint8_t> data);

// The CRC-32 of A ++ B from crc(A), crc(B) and the length of B, for one fixed |B| (zlib's
// crc32_combine): crc(A) times x^(8·|B|) modulo the polynomial, plus crc(B). The product is
// linear in crc(A), so four 256-entry tables (4 KiB, built once) make it four lookups.
class Crc32Shift {
 public:
  explicit Crc32Shift(uint64_t len_b);
  uint64_t length() const { return len_; }
  uint32_t combine(uint32_t crc_a, uint32_t crc_b) const {
    return t_[0][crc_a & 0xFF] ^ t_[1][(crc_a >> 8) & 0xFF] ^ t_[2][(crc_a >> 16) & 0xFF] ^ t_[3][crc_a >> 24] ^
           crc_b;
  }

 private:
  uint64_t len_;
  uint32_t t_[4][256];
};

// The change of a 16-bit field that explains a change of a message's CRC-32: for two messages of
// the same length that differ only in two adjacent bytes followed by `bytes_after` more bytes,
// `delta` = crc(m) ^ crc(m') gives m's two bytes XOR m''s, high byte (the first) in bits 15-8.
// nullopt when no change of those two bytes alone yields `delta` (another part of the message
// differs too): of the 2^32 deltas only 2^16 are such a change. The CRC is linear, so this undoes
// the shift through the bytes after the field (x^(-8·bytes_after) modulo the polynomial, cached for
// a few lengths per thread) and then the two table steps of the field itself.
std::optional<uint16_t> crc32_solve_be16(uint32_t delta, uint64_t bytes_after);

// The simple bitwise reference (one bit per step); for tests only.
uint32_t crc32_bitwise_for_test(uint32_t crc, std::span<const uint8_t> data);

}  // namespace rdmad::roce
