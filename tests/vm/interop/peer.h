#pragma once
// One side of the interop test: a device of either backend through the project's verbs interface,
// one registered region (a source area and a destination area), and an RC QP per path MTU. The
// initiator of a case posts its work requests and waits for them; the target prepares (fills,
// posts receives) before and checks (completions, bytes, guard bytes) after.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "plan.h"
#include "rdmad/verbs/registry.h"

namespace rdmad::vm {

/// What the other side needs to reach a QP and the region.
struct QpInfo {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  verbs::Gid gid;
  uint16_t udp_port = 4791;
  std::string to_line() const;  // "qp <qpn> <psn> <gid hex> <port>"
  static bool parse(const std::string& line, QpInfo* out);
};

struct RegionInfo {
  uint64_t addr = 0;  // the source area; the destination area follows it
  uint32_t rkey = 0;
};

/// Byte pattern of work request `k` of a case with this seed (every byte, any length).
void fill_pattern(uint8_t* p, size_t n, uint64_t seed);

class Peer {
 public:
  /// Opens the device and registers the region; the error names what failed.
  verbs::Status open(const verbs::BackendRegistry& registry, const std::string& backend,
                     const verbs::DeviceConfig& config);
  ~Peer();

  const verbs::PortInfo& port() const { return port_; }
  RegionInfo region() const;
  verbs::NicCounters counters() const { return dev_->counters(); }
  std::vector<verbs::DcqcnSample> dcqcn_samples() const { return dev_->dcqcn_samples(); }

  /// A fresh QP (the previous one destroyed) with a new initial PSN.
  verbs::Status create_qp(uint32_t psn);
  QpInfo local() const;
  verbs::Status connect(const QpInfo& remote, uint32_t mtu, uint8_t timeout);

  /// Initiator: posts the case's WRs to the remote region and waits for their completions; READs
  /// are checked here (the data lands locally).
  verbs::Status initiate(const Case& c, uint64_t seed, const RegionInfo& remote,
                         std::chrono::steady_clock::time_point deadline);
  /// Target, before: guard bytes in the destination, the pattern in the source (READ), receives
  /// posted (SEND, WRITE with immediate).
  verbs::Status prepare(const Case& c, uint64_t seed);
  /// Target, after: receive completions (status, length, immediate, order), bytes and guards.
  verbs::Status check(const Case& c, uint64_t seed, std::chrono::steady_clock::time_point deadline);

 private:
  verbs::Status wait(verbs::CompletionQueue& cq, uint32_t n, bool recv, const Case& c, uint64_t seed,
                     std::chrono::steady_clock::time_point deadline);
  verbs::Status check_area(const uint8_t* area, const Case& c, uint64_t seed, const char* what) const;
  uint8_t* src() { return buf_.get(); }
  uint8_t* dst() { return buf_.get() + kAreaBytes; }

  std::unique_ptr<verbs::Device> dev_;
  std::unique_ptr<verbs::ProtectionDomain> pd_;
  std::unique_ptr<verbs::CompletionQueue> scq_;
  std::unique_ptr<verbs::CompletionQueue> rcq_;
  std::unique_ptr<verbs::QueuePair> qp_;
  std::unique_ptr<uint8_t[]> buf_;
  std::unique_ptr<verbs::MemoryRegion> mr_;
  verbs::PortInfo port_;
  uint32_t psn_ = 0;
};

/// The immediate of work request k.
inline uint32_t imm_of(uint64_t seed, uint32_t k) {
  return static_cast<uint32_t>(seed * 2654435761u) ^ (k << 24);
}

}  // namespace rdmad::vm
