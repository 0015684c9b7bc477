#include "staging.h"

#include <bit>

namespace rdmad::nccl {

StagingPool::~StagingPool() {
  for (auto& [size, list] : free_)
    for (Staging* s : list) destroy(s);
}

size_t StagingPool::size_class(size_t bytes) {
  constexpr size_t kMin = 64 * 1024;
  return bytes <= kMin ? kMin : std::bit_ceil(bytes);
}

Staging* StagingPool::acquire(size_t bytes, std::string* error) {
  const size_t cls = size_class(bytes);
  if (auto it = free_.find(cls); it != free_.end() && !it->second.empty()) {
    Staging* s = it->second.back();
    it->second.pop_back();
    cached_ -= cls;
    return s;
  }
  auto* s = new Staging;
  s->bytes = cls;
  if (rdmad_alloc_host(cls, &s->host) != RDMAD_OK) {
    *error = "staging memory of " + std::to_string(cls) + " bytes: " + rdmad_last_error(nullptr);
    delete s;
    return nullptr;
  }
  const uint32_t access = RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE;
  if (rdmad_register_host(client_, s->host.fd, 0, cls, access, 0, &s->mr) != RDMAD_OK) {
    *error = "registering staging memory of " + std::to_string(cls) + " bytes: " + rdmad_last_error(client_);
    rdmad_free_host(&s->host);
    delete s;
    return nullptr;
  }
  ++allocated_;
  return s;
}

void StagingPool::release(Staging* s) {
  if (s == nullptr) return;
  if (cached_ + s->bytes > cap_) {
    destroy(s);
    return;
  }
  cached_ += s->bytes;
  free_[s->bytes].push_back(s);
}

void StagingPool::destroy(Staging* s) {
  if (s->mr != nullptr) rdmad_deregister(client_, s->mr);
  rdmad_free_host(&s->host);
  delete s;
}

}  // namespace rdmad::nccl
