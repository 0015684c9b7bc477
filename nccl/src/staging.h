// Host memory for NCCL's host buffers. NCCL allocates those itself (cudaHostAlloc, malloc), so they
// are not memfd-backed and the daemon cannot map them: a send is copied into a staging buffer the
// plugin owns (a sealed memfd registered with rdmad once) and a receive lands in one and is copied
// out when it completes. Buffers are kept by power-of-two size class for reuse, up to a byte cap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rdmad/rdmad.h"

namespace rdmad::nccl {

struct Staging {
  rdmad_host_buffer host{};
  rdmad_mr* mr = nullptr;
  size_t bytes = 0;  // the size class
  uint8_t* data() const { return static_cast<uint8_t*>(host.addr); }
};

class StagingPool {
 public:
  // `cached_cap`: bytes of idle buffers kept for reuse; above it, released buffers are freed.
  StagingPool(rdmad_client* client, size_t cached_cap) : client_(client), cap_(cached_cap) {}
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // A buffer of at least `bytes` (≥ 1), registered for local and remote write; nullptr with
  // *error set when the allocation or the registration fails.
  Staging* acquire(size_t bytes, std::string* error);
  void release(Staging* s);
  // Frees `s` without reusing it (a request abandoned while the daemon may still write into it).
  void discard(Staging* s) { destroy(s); }

  size_t cached_bytes() const { return cached_; }
  size_t allocated() const { return allocated_; }

  static size_t size_class(size_t bytes);

 private:
  void destroy(Staging* s);

  rdmad_client* client_;
  size_t cap_;
  size_t cached_ = 0;
  size_t allocated_ = 0;  // buffers made over the pool's life (each one registration)
  std::map<size_t, std::vector<Staging*>> free_;
};

}  // namespace rdmad::nccl
