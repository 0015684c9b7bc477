#pragma once
// The kubelet's probes on the metrics listener (docs/operations.md, "Probes"):
//   /healthz (liveness): 200 "ok" only when the control io_context runs a command posted to it within
//            the deadline and no watched thread is stalled (what the systemd watchdog means);
//   /readyz  (readiness): 200 when judge_readiness says so, judged on the control thread within the
//            same deadline; 503 with the reasons otherwise.
// Each answer runs on a CivetWeb thread; the command it posts is the only thing that touches the
// control thread's state. At most kMaxPending commands wait on the control thread at once (a probe
// beyond that answers 503 at once), so a stalled loop does not pile up work.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "rdmad/daemon/health.h"
#include "rdmad/metrics/exporter.h"

namespace rdmad::daemon {

class Probes {
 public:
  static constexpr int kMaxPending = 4;
  // Runs on the control thread: what readiness is judged on.
  using Input = std::function<HealthInput()>;
  // Any thread: the names of the watched threads that are stalled now.
  using Stalled = std::function<std::vector<std::string>()>;

  Probes(boost::asio::io_context& io, std::chrono::milliseconds deadline);
  Probes(const Probes&) = delete;
  Probes& operator=(const Probes&) = delete;

  // Serves /healthz and /readyz on `exporter` (answering 503 "starting" until serving()).
  void attach(metrics::Exporter& exporter);
  // The control loop runs from now on, with these sources (set once, before).
  void serving(Input input, Stalled stalled);
  // The control loop has stopped: 503 "stopping".
  void stopping() { phase_.store(kStopping, std::memory_order_release); }
  // [metrics] probe_timeout_ms, live on reload.
  void set_deadline(std::chrono::milliseconds d) { deadline_ms_.store(d.count(), std::memory_order_relaxed); }

  metrics::HttpAnswer liveness();
  metrics::HttpAnswer readiness();

 private:
  enum Phase : int { kStarting, kServing, kStopping };
  // Runs `fn` on the control thread and waits for its answer until the deadline; 503 naming the
  // deadline when it did not answer.
  metrics::HttpAnswer on_control(std::function<metrics::HttpAnswer()> fn);
  std::optional<metrics::HttpAnswer> not_serving() const;

  boost::asio::io_context& io_;
  std::atomic<int64_t> deadline_ms_;
  std::atomic<int> phase_{kStarting};
  std::atomic<int> pending_{0};
  Input input_;      // written before phase_ is kServing, read after
  Stalled stalled_;  // likewise
};

}  // namespace rdmad::daemon
