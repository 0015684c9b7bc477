// Host memory the daemon can map as it is: a range inside one shared, writable mapping of a memfd
// sealed against shrinking, whose descriptor this process holds (librdmad's rdmad_alloc_host gives
// such buffers). The plugin registers it without a staging buffer, and its messages move without a
// copy, as GPU memory through dma-buf does. Anything else (NCCL's own cudaHostAlloc'd buffers,
// malloc, a private mapping) is staged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace rdmad::nccl {

struct MemfdRange {
  int fd = -1;          // a duplicate of the process's descriptor (the caller closes it)
  uint64_t offset = 0;  // of the range's first byte in the memfd
};

// Looks [data, data+size) up in /proc/self/maps and a descriptor of its memfd in /proc/self/fd.
std::optional<MemfdRange> find_memfd(const void* data, size_t size);

}  // namespace rdmad::nccl
