#pragma once
// CRC-32 with the Ethernet/zlib polynomial (reflected 0xEDB88320). Bit-identical to zlib's crc32():
// crc32_update(0, ...) == crc32(0, ...). Long inputs use carry-less-multiply folding (PCLMULQDQ, or
// VPCLMULQDQ with AVX-512) when the CPU has it, chosen once at run time; short inputs and other
// CPUs use slicing-by-8. See crc32_impl.h.
#include <cstddef>
#include <cstdint>
#include <span>

namespace rdmad::roce {

// Continues a CRC-32 over `data`; start with crc = 0. Pre/post inversion is handled inside, so
// crc32_update(crc32_update(0, a), b) == crc32_update(0, a ++ b).
uint32_t crc32_update(uint32_t crc, std::span<const uint8_t> data);

// The simple bitwise reference (one bit per step); for tests only.
uint32_t crc32_bitwise_for_test(uint32_t crc, std::span<const uint8_t> data);

}  // namespace rdmad::roce
