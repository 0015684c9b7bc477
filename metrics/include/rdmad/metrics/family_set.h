#pragma once
// Builds Prometheus metric families at scrape time, for collectors that read live counters (the
// datapath's per-thread counters, sysfs hw_counters) instead of keeping prometheus objects updated
// on the hot path.
#include <prometheus/metric_family.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "rdmad/metrics/metric.h"

namespace rdmad::metrics {

using LabelList = std::vector<std::pair<std::string, std::string>>;

class FamilySet {
 public:
  // Names and help are views so that callers passing literals allocate nothing per series (a large
  // node builds over 10,000 series per scrape).
  void counter(std::string_view name, std::string_view help, const LabelList& labels, double value);
  void gauge(std::string_view name, std::string_view help, const LabelList& labels, double value);
  // One series of a declared counter or gauge (histograms are kept by prometheus-cpp, never built
  // at scrape time).
  void add(const Metric& m, const LabelList& labels, double value);
  // The families in first-use order.
  std::vector<prometheus::MetricFamily> take();

 private:
  prometheus::ClientMetric& add(std::string_view name, std::string_view help, prometheus::MetricType type,
                                const LabelList& labels);
  std::vector<prometheus::MetricFamily> families_;
  std::map<std::string, size_t, std::less<>> index_;
};

}  // namespace rdmad::metrics
