#include "rdmad/verbs/registry.h"

namespace rdmad::verbs {

void BackendRegistry::add(BackendInfo info) {
  for (auto& b : backends_) {
    if (b.name == info.name) {
      b = std::move(info);
      return;
    }
  }
  backends_.push_back(std::move(info));
}

const BackendInfo* BackendRegistry::find(const std::string& name) const {
  for (const auto& b : backends_) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

std::vector<std::string> BackendRegistry::names() const {
  std::vector<std::string> out;
  out.reserve(backends_.size());
  for (const auto& b : backends_) out.push_back(b.name);
  return out;
}

Result<std::unique_ptr<Device>> BackendRegistry::open(const std::string& backend,
                                                      const DeviceConfig& config) const {
  const BackendInfo* b = find(backend);
  if (b == nullptr) return Status::error("unknown verbs backend '" + backend + "'");
  return b->open(config);
}

}  // namespace rdmad::verbs
