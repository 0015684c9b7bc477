#include "rdmad/sim/traffic.h"

#include <algorithm>
#include <stdexcept>

#include "rdmad/sim/flow_size_cdf.h"
#include "rdmad/sim/rng.h"

namespace rdmad::sim {
namespace {

// Sender/receiver pairs for long flows and incast: the topology's own senders, or on a fabric every
// host but the last sending to the last.
std::pair<std::vector<uint32_t>, std::vector<uint32_t>> pairs(const Topology& topo) {
  if (!topo.senders.empty()) {
    std::vector<uint32_t> dst = topo.receivers;
    if (dst.size() == 1) dst.assign(topo.senders.size(), topo.receivers[0]);
    return {topo.senders, dst};
  }
  std::vector<uint32_t> src;
  for (uint32_t h = 0; h + 1 < topo.hosts; ++h) src.push_back(h);
  return {src, std::vector<uint32_t>(src.size(), topo.hosts - 1)};
}

SimTimeNs us_to_ns(double us) { return static_cast<SimTimeNs>(us * 1000.0); }

}  // namespace

std::vector<FlowSpec> generate_traffic(const Scenario& s, const Topology& topo) {
  const TrafficConfig& t = s.traffic;
  std::vector<FlowSpec> flows;
  if (t.kind == TrafficKind::kPoisson) {
    FlowSizeCdf cdf = FlowSizeCdf::load(t.cdf);
    Rng rng(s.seed);
    // Every host offers `load` of its link: per-host rate λ = load·C/(8·mean); merged over hosts.
    double per_host_flows_per_ns = t.load * s.topology.host_link_gbps / (8.0 * cdf.mean_bytes());
    double mean_gap_ns = 1.0 / (per_host_flows_per_ns * topo.hosts);
    double now = t.start_us * 1000.0;
    for (uint32_t i = 0; i < t.flow_count; ++i) {
      now += rng.exponential(mean_gap_ns);
      uint32_t src = rng.below(topo.hosts);
      uint32_t dst = rng.below(topo.hosts - 1);
      if (dst >= src) ++dst;
      flows.push_back({src, dst, cdf.sample(rng.uniform()), static_cast<SimTimeNs>(now)});
    }
    return flows;
  }
  auto [src, dst] = pairs(topo);
  uint32_t n = t.flows == 0 ? static_cast<uint32_t>(src.size()) : t.flows;
  if (n > src.size()) throw std::runtime_error("traffic.flows exceeds the number of senders");
  uint32_t bursts = t.kind == TrafficKind::kIncast ? std::max<uint32_t>(t.bursts, 1) : 1;
  for (uint32_t b = 0; b < bursts; ++b) {
    for (uint32_t i = 0; i < n; ++i) {
      double start =
          t.start_us + b * t.burst_interval_us + (t.kind == TrafficKind::kLongFlows ? i * t.stagger_us : 0);
      flows.push_back({src[i], dst[i], t.size_bytes, us_to_ns(start)});
    }
  }
  std::stable_sort(flows.begin(), flows.end(),
                   [](const FlowSpec& x, const FlowSpec& y) { return x.start_ns < y.start_ns; });
  return flows;
}

}  // namespace rdmad::sim
