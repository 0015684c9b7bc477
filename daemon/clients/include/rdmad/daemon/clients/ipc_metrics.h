// Prometheus metrics of the client service. Labels are bounded enumerations only (kind, op,
// result): never a uid, pid or address. Thread-safe (the server's workers share it).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <atomic>
#include <cstdint>

#include "rdmad/protocol.h"
#include "rdmad/rdmad.h"

namespace rdmad::clients {

class IpcMetrics {
 public:
  explicit IpcMetrics(prometheus::Registry& registry);

  void client_connected() { clients_.Increment(); }
  void client_disconnected() { clients_.Decrement(); }
  // One daemon-side memory region (after deduplication) appeared or went away.
  void region_added(rdmad_mem_kind kind, uint64_t bytes);
  void region_removed(rdmad_mem_kind kind, uint64_t bytes);
  void observe_registration_seconds(double seconds) { duration_.Observe(seconds); }
  // One request of protocol type `type` (0 or out of range: "unknown") finished with `result`.
  void request(uint16_t type, rdmad_status result);
  // Highest usage / quota ratio of any uid (pinned bytes or registration count), 0..1.
  void set_quota_usage_max_ratio(double ratio) { quota_ratio_.Set(ratio); }

 private:
  static constexpr size_t kOps = proto::kMaxRequestType + 1;  // unknown + every request type
  static constexpr size_t kResults = 15;  // RDMAD_OK .. RDMAD_ERR_REMOTE_ACCESS
  prometheus::Gauge& clients_;
  prometheus::Gauge& quota_ratio_;
  std::array<prometheus::Gauge*, 2> regions_{};
  std::array<prometheus::Gauge*, 2> bytes_{};
  prometheus::Histogram& duration_;
  prometheus::Family<prometheus::Counter>& requests_;
  // Filled on first use; Family::Add returns the same counter to racing threads.
  std::array<std::array<std::atomic<prometheus::Counter*>, kResults>, kOps> request_counters_{};
};

}  // namespace rdmad::clients
