#pragma once
// A verbs::Device that opens and answers queries with defaults: for NIC slot tests, which need
// devices to hold, not to carry traffic. `samples` is what dcqcn_samples() returns.
#include <memory>
#include <string>
#include <vector>

#include "rdmad/verbs/device.h"

namespace rdmad::daemon {

class StubDevice final : public verbs::Device {
 public:
  explicit StubDevice(std::string name, std::vector<verbs::DcqcnSample> samples = {}) : samples_(std::move(samples)) {
    info_.name = std::move(name);
  }
  const verbs::DeviceInfo& info() const override { return info_; }
  verbs::Result<verbs::PortInfo> query_port(uint8_t) const override { return verbs::PortInfo{}; }
  verbs::Result<std::unique_ptr<verbs::ProtectionDomain>> alloc_pd() override {
    return verbs::Status::not_supported("stub");
  }
  verbs::Result<std::unique_ptr<verbs::CompletionQueue>> create_cq(uint32_t) override {
    return verbs::Status::not_supported("stub");
  }
  verbs::NicCounters counters() const override { return {}; }
  std::vector<verbs::DcqcnSample> dcqcn_samples() const override { return samples_; }

 private:
  verbs::DeviceInfo info_;
  std::vector<verbs::DcqcnSample> samples_;
};

}  // namespace rdmad::daemon
