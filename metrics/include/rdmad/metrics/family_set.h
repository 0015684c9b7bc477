#pragma once
// Builds Prometheus metric families at scrape time, for collectors that read live counters (the
// datapath's per-thread counters, sysfs hw_counters) instead of keeping prometheus objects updated
// on the hot path.
#include <map>
#include <string>
#include <vector>

#include <prometheus/metric_family.h>

namespace rdmad::metrics {

using LabelList = std::vector<std::pair<std::string, std::string>>;

class FamilySet {
 public:
  void counter(const std::string& name, const std::string& help, const LabelList& labels, double value);
  void gauge(const std::string& name, const std::string& help, const LabelList& labels, double value);
  // The families in first-use order.
  std::vector<prometheus::MetricFamily> take();

 private:
  prometheus::ClientMetric& add(const std::string& name, const std::string& help, prometheus::MetricType type,
                                const LabelList& labels);
  std::vector<prometheus::MetricFamily> families_;
  std::map<std::string, size_t> index_;
};

}  // namespace rdmad::metrics
