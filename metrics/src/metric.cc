#include "rdmad/metrics/metric.h"

#include <stdexcept>
#include <string>

namespace rdmad::metrics {
namespace {

template <typename Builder>
auto& build(Builder&& builder, const Metric& m, Kind expected, prometheus::Registry& registry) {
  if (m.kind != expected) throw std::invalid_argument(std::string(m.name) + " is declared as another kind");
  return builder.Name(std::string(m.name)).Help(std::string(m.help)).Register(registry);
}

}  // namespace

prometheus::Family<prometheus::Counter>& build_counter(const Metric& m, prometheus::Registry& registry) {
  return build(prometheus::BuildCounter(), m, Kind::kCounter, registry);
}

prometheus::Family<prometheus::Gauge>& build_gauge(const Metric& m, prometheus::Registry& registry) {
  return build(prometheus::BuildGauge(), m, Kind::kGauge, registry);
}

prometheus::Family<prometheus::Histogram>& build_histogram(const Metric& m, prometheus::Registry& registry) {
  return build(prometheus::BuildHistogram(), m, Kind::kHistogram, registry);
}

}  // namespace rdmad::metrics
