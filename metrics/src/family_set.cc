#include "rdmad/metrics/family_set.h"

namespace rdmad::metrics {

prometheus::ClientMetric& FamilySet::add(std::string_view name, std::string_view help,
                                         prometheus::MetricType type, const LabelList& labels) {
  auto it = index_.find(name);
  if (it == index_.end()) {
    it = index_.emplace(std::string(name), families_.size()).first;
    prometheus::MetricFamily f;
    f.name = name;
    f.help = help;
    f.type = type;
    families_.push_back(std::move(f));
  }
  auto& family = families_[it->second];
  prometheus::ClientMetric m;
  m.label.reserve(labels.size());
  for (const auto& [k, v] : labels) m.label.push_back(prometheus::ClientMetric::Label{k, v});
  family.metric.push_back(std::move(m));
  return family.metric.back();
}

void FamilySet::counter(std::string_view name, std::string_view help, const LabelList& labels, double value) {
  add(name, help, prometheus::MetricType::Counter, labels).counter.value = value;
}

void FamilySet::gauge(std::string_view name, std::string_view help, const LabelList& labels, double value) {
  add(name, help, prometheus::MetricType::Gauge, labels).gauge.value = value;
}

void FamilySet::add(const Metric& m, const LabelList& labels, double value) {
  if (m.kind == Kind::kCounter) {
    counter(m.name, m.help, labels, value);
  } else {
    gauge(m.name, m.help, labels, value);
  }
}

std::vector<prometheus::MetricFamily> FamilySet::take() {
  index_.clear();
  return std::move(families_);
}

}  // namespace rdmad::metrics
