#include "rdmad/metrics/daemon_metrics.h"

namespace rdmad::metrics {

DaemonMetrics::DaemonMetrics(prometheus::Registry& registry, const std::string& version, const std::string& commit,
                             double start_time_seconds)
    : reloads_(prometheus::BuildCounter()
                   .Name("rdmad_config_reloads_total")
                   .Help("Configuration reloads (SIGHUP), by result.")
                   .Register(registry)),
      reload_ok_(reloads_.Add({{"result", "ok"}})),
      reload_error_(reloads_.Add({{"result", "error"}})),
      node_info_(prometheus::BuildGauge()
                     .Name("rdmad_node_info")
                     .Help("Always 1; carries the constant labels of [metrics] labels.")
                     .Register(registry)) {
  prometheus::BuildGauge()
      .Name("rdmad_build_info")
      .Help("Always 1; the version and commit of the running daemon.")
      .Register(registry)
      .Add({{"version", version}, {"commit", commit}})
      .Set(1);
  prometheus::BuildGauge()
      .Name("rdmad_start_time_seconds")
      .Help("Start time of the daemon since the Unix epoch, in seconds.")
      .Register(registry)
      .Add({})
      .Set(start_time_seconds);
  set_node_labels({});
}

void DaemonMetrics::set_node_labels(const std::map<std::string, std::string>& labels) {
  if (node_info_series_ != nullptr) node_info_.Remove(node_info_series_);
  node_info_series_ = &node_info_.Add(labels);
  node_info_series_->Set(1);
}

}  // namespace rdmad::metrics
