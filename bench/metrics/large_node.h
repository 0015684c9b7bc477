#pragma once
// The metrics of a synthetic node: NICs with per-port registry series (as hardware counters are
// kept), plus a collector that builds the rest at scrape time from plain counters with FamilySet
// (the way the daemon's NIC collector does): per-NIC histograms, per-priority and per-flow series,
// per-NIC balancer series and per-uid registration series.
#include <prometheus/collectable.h>
#include <prometheus/registry.h>

#include <memory>

namespace rdmad::bench {

struct NodeShape {
  int nics = 16;
  int histograms_per_nic = 4;  // at most 4, 20 buckets each
  int priorities = 8;
  int flows_per_nic = 64;
  int uids = 500;
  int request_ops = 9;  // rdmad_client_requests_total: ops x 13 results
};

// Adds the registry families for `shape` to `registry` and returns the scrape-time collector (the
// caller keeps it alive and registers it with the exporter).
std::shared_ptr<prometheus::Collectable> populate_node(prometheus::Registry& registry,
                                                       const NodeShape& shape);

}  // namespace rdmad::bench
