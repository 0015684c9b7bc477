#pragma once
// A metric family's declaration: its name (base units: docs/operations.md, "Metric names"), help
// text and kind. Each subsystem declares its families once, in one table (daemon_metrics.cc,
// ipc_metrics.cc, flow_metric_table.h, port_metric_table.h), and both ways of exporting read that
// declaration: the prometheus-cpp families a subsystem keeps and updates (build_*), and the
// FamilySet a collector fills at scrape time (FamilySet::add). A name or a help text is thus
// written once, whichever way its series are exported.
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <string_view>

namespace rdmad::metrics {

enum class Kind { kCounter, kGauge, kHistogram };

struct Metric {
  std::string_view name;
  std::string_view help;
  Kind kind;
};

// Register `m` on `registry`. A declaration of another kind is a programming error, thrown at
// start-up (the only time families are built).
prometheus::Family<prometheus::Counter>& build_counter(const Metric& m, prometheus::Registry& registry);
prometheus::Family<prometheus::Gauge>& build_gauge(const Metric& m, prometheus::Registry& registry);
prometheus::Family<prometheus::Histogram>& build_histogram(const Metric& m, prometheus::Registry& registry);

}  // namespace rdmad::metrics
