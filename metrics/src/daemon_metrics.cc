#include "rdmad/metrics/daemon_metrics.h"

#include "rdmad/metrics/metric.h"

namespace rdmad::metrics {
namespace {

// The process's families, declared once.
constexpr Metric kConfigReloads{"rdmad_config_reloads_total", "Configuration reloads (SIGHUP), by result.",
                                Kind::kCounter};
constexpr Metric kNodeInfo{"rdmad_node_info", "Always 1; carries the constant labels of [metrics] labels.",
                           Kind::kGauge};
constexpr Metric kBuildInfo{"rdmad_build_info", "Always 1; the version and commit of the running daemon.",
                            Kind::kGauge};
constexpr Metric kStartTime{"rdmad_start_time_seconds", "Start time of the daemon since the Unix epoch, in seconds.",
                            Kind::kGauge};

}  // namespace

DaemonMetrics::DaemonMetrics(prometheus::Registry& registry, const std::string& version, const std::string& commit,
                             double start_time_seconds)
    : reloads_(build_counter(kConfigReloads, registry)),
      reload_ok_(reloads_.Add({{"result", "ok"}})),
      reload_error_(reloads_.Add({{"result", "error"}})),
      node_info_(build_gauge(kNodeInfo, registry)) {
  build_gauge(kBuildInfo, registry).Add({{"version", version}, {"commit", commit}}).Set(1);
  build_gauge(kStartTime, registry).Add({}).Set(start_time_seconds);
  set_node_labels({});
}

void DaemonMetrics::set_node_labels(const std::map<std::string, std::string>& labels) {
  if (node_info_series_ != nullptr) node_info_.Remove(node_info_series_);
  node_info_series_ = &node_info_.Add(labels);
  node_info_series_->Set(1);
}

}  // namespace rdmad::metrics
