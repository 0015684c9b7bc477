#pragma once
// The node's [[nic]] slots: opens every [[nic]] through the backend registry at start-up, logs what
// it found (link layer, state, speed, address/GID), exports per-port counters at scrape time, and
// samples the software NICs' DCQCN state (rate, α per QP) into histograms. NodeNics owns it.
//
// Every [[nic]] keeps its slot, in file order, whether or not it opened: a NIC's index (the
// client protocol's NIC index, the flows' lane, the rail it pairs with on a peer) is its position
// in the file and never shifts when another NIC is missing. A hardware NIC that cannot open is out
// of service with the reason, and retry() opens it again later, with back-off.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <prometheus/collectable.h>

#include "rdmad/base/status.h"
#include "rdmad/config/config.h"
#include "rdmad/verbs/device.h"
#include "rdmad/verbs/registry.h"

namespace prometheus {
class Histogram;
class Registry;
}  // namespace prometheus

namespace rdmad::daemon {

struct Nic {
  config::NicSection config;
  const verbs::BackendInfo* backend = nullptr;  // the registry's entry (null: no such backend)
  std::unique_ptr<verbs::Device> device;  // nullptr while out of service
  std::string out_of_service;             // why it is not open ("" when it is)
  verbs::DeviceConfig device_config;      // what it is opened with
  // Retries of an out-of-service NIC: the first at the next poll, then after 1 s, doubling to 60 s.
  std::chrono::steady_clock::time_point next_retry{};
  std::chrono::milliseconds retry_backoff{0};
  uint32_t failed_opens = 0;

  bool in_service() const { return device != nullptr; }
  /// The port QPs and counters use (a NIC the backend makes has one).
  uint8_t port() const {
    return backend != nullptr && backend->caps.opens_named_device ? static_cast<uint8_t>(config.port) : 1;
  }
};

/// The buckets of rdmad_dcqcn_rate_bits_per_second: 10 Mb/s to 400 Gb/s, in bits per second (the
/// deprecated rdmad_dcqcn_rate_mbps has the same ones in Mb/s).
std::vector<double> dcqcn_rate_buckets_bits_per_second();

class NicSlots {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kRetryBackoffMin{1000};
  static constexpr std::chrono::milliseconds kRetryBackoffMax{60000};

  explicit NicSlots(const verbs::BackendRegistry& registry) : registry_(registry) {}

  // Opens every configured NIC. An error names the NIC and the cause (a start-up error: a soft NIC
  // that cannot open). A hardware NIC that cannot open is logged and left out of service in its slot.
  base::Status open(const config::Config& config);
  /// Every [[nic]], in file order (index = NIC index), opened or not.
  const std::vector<Nic>& nics() const { return nics_; }
  /// The [[nic]] named `name`, opened or not; nullptr when none is.
  const Nic* find(const std::string& name) const;
  /// The registry the NICs were opened through (what each backend can do).
  const verbs::BackendRegistry& backends() const { return registry_; }
  /// Tries to open the out-of-service NICs whose retry is due at `now`; returns the indices of those
  /// that opened (each logged). Control thread.
  std::vector<size_t> retry(Clock::time_point now);
  // Reads counters and port state from every NIC when Prometheus scrapes.
  std::shared_ptr<prometheus::Collectable> collector() const;
  // Registers rdmad_dcqcn_rate_bits_per_second (and its deprecated Mb/s twin, rdmad_dcqcn_rate_mbps,
  // for one release) and rdmad_dcqcn_alpha on `registry` with one child per soft NIC port, so the
  // families show (empty) before any QP is up. Call once, after open(). Hardware NICs
  // have none: their DCQCN runs in firmware (nic_cc reports its configuration).
  void add_dcqcn_metrics(prometheus::Registry& registry);
  // Observes the rate and α of every QP in RTS on every soft NIC (the daemon calls it every second).
  void sample_dcqcn();
  /// The diagnose lines of the NICs out of service ("warn nic NAME: out of service: REASON; ...").
  std::string diagnosis() const;

 private:
  struct DcqcnHistograms {
    const verbs::Device* device;
    prometheus::Histogram* rate;       // bits per second
    prometheus::Histogram* rate_mbps;  // deprecated: the same samples in Mb/s
    prometheus::Histogram* alpha;
  };
  void log_ports(const Nic& nic) const;
  void failed(Nic& nic, const std::string& why, Clock::time_point now);

  const verbs::BackendRegistry& registry_;
  std::vector<Nic> nics_;
  std::vector<DcqcnHistograms> dcqcn_;
};

}  // namespace rdmad::daemon
