#pragma once
// Process-level series: rdmad_build_info, rdmad_start_time_seconds, rdmad_config_reloads_total and
// rdmad_node_info (constant labels from [metrics] labels, replaced on reload).
#include <map>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

namespace rdmad::metrics {

class DaemonMetrics {
 public:
  DaemonMetrics(prometheus::Registry& registry, const std::string& version, const std::string& commit,
                double start_time_seconds);

  void reload_succeeded() { reload_ok_.Increment(); }
  void reload_failed() { reload_error_.Increment(); }
  // Replaces the labels of rdmad_node_info (live on reload).
  void set_node_labels(const std::map<std::string, std::string>& labels);

 private:
  prometheus::Family<prometheus::Counter>& reloads_;
  prometheus::Counter& reload_ok_;
  prometheus::Counter& reload_error_;
  prometheus::Family<prometheus::Gauge>& node_info_;
  prometheus::Gauge* node_info_series_ = nullptr;
};

}  // namespace rdmad::metrics
