#include "rdmad/sim/traffic.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "rdmad/sim/flow_size_cdf.h"
#include "traffic_builder.h"

namespace rdmad::sim {
namespace {

[[noreturn]] void fail(const std::string& at, const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {}", at, what));
}

// Source k's random stream: the seed itself for the first (the single [traffic] source had it).
uint64_t stream_seed(uint64_t seed, size_t k) { return k == 0 ? seed : mix64(seed ^ (0x5eed0000ULL + k)); }

}  // namespace

SimTimeNs us_to_ns(double us) { return static_cast<SimTimeNs>(us * 1000.0); }

TrafficBuilder::TrafficBuilder(const Scenario& s, const Topology& topo, bool check_only)
    : s_(s), topo_(topo), check_only_(check_only) {
  for (uint32_t h = 0; h < topo.hosts; ++h) nic_by_name_[topo.host_names[h]] = h;
  for (uint32_t m = 0; m < topo.machines.size(); ++m) host_by_name_[topo.machines[m].name] = m;
  // A NIC has one link and never forwards, so two NICs have a path when they are connected.
  component_.resize(topo.nodes());
  std::iota(component_.begin(), component_.end(), 0u);
  const auto root = [&](uint32_t n) {
    while (component_[n] != n) n = component_[n] = component_[component_[n]];
    return n;
  };
  for (const LinkSpec& l : topo.links) component_[root(l.a)] = root(l.b);
  for (uint32_t n = 0; n < topo.nodes(); ++n) component_[n] = root(n);
}

void TrafficBuilder::require_path(uint32_t src, uint32_t dst) const {
  if (component_[src] != component_[dst]) {
    fail(where_, fmt::format("no path from '{}' to '{}' in the topology", topo_.host_names[src],
                             topo_.host_names[dst]));
  }
}

uint32_t TrafficBuilder::add(uint32_t src, uint32_t dst, uint64_t size_bytes, SimTimeNs start_ns,
                             uint32_t after) {
  require_path(src, dst);
  flows_.push_back({src, dst, size_bytes, start_ns});
  after_.push_back(after);
  any_after_ = any_after_ || after != kNoFlow;
  window_flows_.push_back(mark_window_ ? 1 : 0);
  return static_cast<uint32_t>(flows_.size() - 1);
}

std::vector<std::string> TrafficBuilder::expand(const std::vector<std::string>& names, const Located& loc,
                                                const std::string& key,
                                                const std::vector<std::string>& all) const {
  std::vector<std::string> out;
  for (const std::string& name : names) {
    if (name == "all") {
      out.insert(out.end(), all.begin(), all.end());
      continue;
    }
    try {
      const std::vector<std::string> expanded = expand_range(name);
      out.insert(out.end(), expanded.begin(), expanded.end());
    } catch (const std::invalid_argument& e) {
      fail(loc.where(key), fmt::format("key 'traffic.source.{}': {}", key, e.what()));
    }
  }
  return out;
}

std::vector<uint32_t> TrafficBuilder::nics(const std::vector<std::string>& names, const Located& loc,
                                           const std::string& key) const {
  std::vector<uint32_t> out;
  for (const std::string& n : expand(names, loc, key, topo_.host_names)) {
    if (auto it = nic_by_name_.find(n); it != nic_by_name_.end()) {
      out.push_back(it->second);
    } else if (auto host = host_by_name_.find(n); host != host_by_name_.end()) {
      const Machine& m = topo_.machines[host->second];
      fail(loc.where(key), fmt::format("key 'traffic.source.{}': host '{}' has {} NICs: name one ('{}')", key,
                                       n, m.nics.size(), topo_.host_names[m.nics[0]]));
    } else {
      fail(loc.where(key), fmt::format("key 'traffic.source.{}': no NIC or host named '{}'", key, n));
    }
  }
  return out;
}

std::vector<uint32_t> TrafficBuilder::hosts(const std::vector<std::string>& names, const Located& loc,
                                            const std::string& key) const {
  std::vector<std::string> all;
  for (const Machine& m : topo_.machines) all.push_back(m.name);
  std::vector<uint32_t> out;
  for (const std::string& n : expand(names, loc, key, all)) {
    auto it = host_by_name_.find(n);
    if (it == host_by_name_.end()) {
      fail(loc.where(key), fmt::format("key 'traffic.source.{}': no host named '{}'{}", key, n,
                                       nic_by_name_.count(n) ? " (it is a NIC; name its host)" : ""));
    }
    if (std::find(out.begin(), out.end(), it->second) != out.end()) {
      fail(loc.where(key), fmt::format("key 'traffic.source.{}': host '{}' is named twice", key, n));
    }
    out.push_back(it->second);
  }
  return out;
}

// Arrivals at `load` of each NIC's link with sizes from the CDF, a uniformly random source (weighted
// by link rate when rates differ) and a destination on another host, as the HPCC generator does.
// With `into`: arrivals at `load` of the links of `into`, from a source among `nics` (weighted as
// above) to a destination among `into` (likewise).
void TrafficBuilder::poisson(Rng& rng, const std::vector<uint32_t>& nics, double load,
                             const std::filesystem::path& cdf_path, uint32_t count, double start_us,
                             const std::vector<uint32_t>& into) {
  const FlowSizeCdf cdf = FlowSizeCdf::load(cdf_path);
  if (check_only_) return;
  const auto rates = [&](const std::vector<uint32_t>& of) {
    std::vector<double> gbps(of.size());
    for (const LinkSpec& l : topo_.links) {
      for (size_t i = 0; i < of.size(); ++i) {
        if (l.a == of[i] || l.b == of[i]) gbps[i] = l.gbps;
      }
    }
    return gbps;
  };
  const auto n = static_cast<uint32_t>(nics.size());
  const std::vector<double> gbps = rates(nics);
  const bool equal = std::all_of(gbps.begin(), gbps.end(), [&](double g) { return g == gbps[0]; });
  // Every NIC offers `load` of its link: rate λ = load·C/(8·mean); merged over NICs.
  double flows_per_ns = load * gbps[0] / (8.0 * cdf.mean_bytes()) * n;
  std::vector<double> cumulative(n);
  if (!equal) {
    std::partial_sum(gbps.begin(), gbps.end(), cumulative.begin());
    flows_per_ns = load * cumulative.back() / (8.0 * cdf.mean_bytes());
  }
  const std::vector<double> into_gbps = rates(into);
  std::vector<double> into_cumulative(into.size());
  std::partial_sum(into_gbps.begin(), into_gbps.end(), into_cumulative.begin());
  if (!into.empty()) flows_per_ns = load * into_cumulative.back() / (8.0 * cdf.mean_bytes());
  const auto weighted = [&](const std::vector<double>& cum) {
    const auto i = std::upper_bound(cum.begin(), cum.end(), rng.uniform() * cum.back()) - cum.begin();
    return std::min(static_cast<uint32_t>(i), static_cast<uint32_t>(cum.size() - 1));
  };
  bool one_nic_each = true;
  for (uint32_t i = 1; i < n; ++i)
    one_nic_each = one_nic_each && topo_.machine_of[nics[i]] != topo_.machine_of[nics[i - 1]];
  const double mean_gap_ns = 1.0 / flows_per_ns;
  double now = start_us * 1000.0;
  for (uint32_t i = 0; i < count; ++i) {
    now += rng.exponential(mean_gap_ns);
    uint32_t src = rng.below(n);
    if (!equal) {
      src = weighted(cumulative);
    }
    if (!into.empty()) {
      add(nics[src], into[weighted(into_cumulative)], cdf.sample(rng.uniform()), static_cast<SimTimeNs>(now));
      continue;
    }
    uint32_t dst;
    if (one_nic_each) {
      dst = rng.below(n - 1);
      if (dst >= src) ++dst;
    } else {
      do {
        dst = rng.below(n);
      } while (topo_.machine_of[nics[dst]] == topo_.machine_of[nics[src]]);
    }
    add(nics[src], nics[dst], cdf.sample(rng.uniform()), static_cast<SimTimeNs>(now));
  }
}

// The [traffic] table: long flows or incast bursts from the topology's senders to its receivers (on
// a fabric every host but the last sending to the last), or Poisson arrivals among all hosts.
void TrafficBuilder::legacy() {
  const TrafficConfig& t = s_.traffic;
  if (t.kind == TrafficKind::kPoisson) {
    Rng rng(s_.seed);
    std::vector<uint32_t> all(topo_.hosts);
    std::iota(all.begin(), all.end(), 0u);
    poisson(rng, all, t.load, t.cdf, t.flow_count, t.start_us);
    return;
  }
  windows_ = true;
  window_all_ = true;
  std::vector<uint32_t> src = topo_.senders;
  std::vector<uint32_t> dst = topo_.receivers;
  if (src.empty()) {
    for (uint32_t h = 0; h + 1 < topo_.hosts; ++h) src.push_back(h);
    dst = {topo_.hosts - 1};
  }
  if (dst.size() == 1) dst.assign(src.size(), dst[0]);
  uint32_t n = t.flows == 0 ? static_cast<uint32_t>(src.size()) : t.flows;
  if (n > src.size()) throw std::runtime_error("traffic.flows exceeds the number of senders");
  if (check_only_) return;
  const bool incast = t.kind == TrafficKind::kIncast;
  uint32_t bursts = incast ? std::max<uint32_t>(t.bursts, 1) : 1;
  for (uint32_t b = 0; b < bursts; ++b) {
    for (uint32_t i = 0; i < n; ++i) {
      double start = t.start_us + b * t.burst_interval_us + (incast ? 0 : i * t.stagger_us);
      const uint32_t id = add(src[i], dst[i], t.size_bytes, us_to_ns(start));
      if (incast) incast_flows_.push_back(id);
    }
  }
}

void TrafficBuilder::source(const TrafficSource& src, size_t index) {
  mark_window_ = false;
  where_ = src.loc.at + ": [[traffic.source]] " + std::to_string(index);
  switch (src.kind) {
    case SourceKind::kFlows:
      flows(src);
      break;
    case SourceKind::kList:
      list(src);
      break;
    case SourceKind::kIncast:
      incast(src);
      break;
    case SourceKind::kPoisson: {
      // With dst: from the hosts that are not destinations into the destinations.
      std::vector<uint32_t> into;
      std::vector<uint32_t> into_machines;
      if (!src.dst.empty()) into_machines = hosts(src.dst, src.loc, "dst");
      for (uint32_t m : into_machines) into.insert(into.end(), topo_.machines[m].nics.begin(), topo_.machines[m].nics.end());
      std::vector<uint32_t> nics;
      for (uint32_t m : hosts(src.hosts, src.loc, "hosts")) {
        if (std::find(into_machines.begin(), into_machines.end(), m) != into_machines.end()) continue;
        nics.insert(nics.end(), topo_.machines[m].nics.begin(), topo_.machines[m].nics.end());
      }
      if (into.empty() && (nics.size() < 2 || topo_.machine_of[nics.front()] == topo_.machine_of[nics.back()])) {
        fail(src.loc.where("hosts"),
             "key 'traffic.source.hosts': a 'poisson' source needs two hosts or more");
      }
      if (!into.empty() && nics.empty()) {
        fail(src.loc.where("dst"),
             "key 'traffic.source.dst': a 'poisson' source needs a host in hosts that is not in dst");
      }
      Rng rng(stream_seed(s_.seed, index));
      try {
        poisson(rng, nics, src.load, src.cdf, src.flow_count, src.start_us, into);
      } catch (const std::runtime_error& e) {
        if (!std::filesystem::exists(src.cdf))
          fail(src.loc.where("cdf"), fmt::format("key 'traffic.source.cdf': {}", e.what()));
        throw;
      }
      break;
    }
    case SourceKind::kAllReduce:
    case SourceKind::kAllToAll:
      collective(src);
      break;
  }
}

// Pairs src[i] → dst[i] (one name on either side pairs with each of the other); flow i starts at
// start_us + i·stagger_us.
void TrafficBuilder::flows(const TrafficSource& src) {
  const std::vector<uint32_t> from = nics(src.src, src.loc, "src");
  const std::vector<uint32_t> to = nics(src.dst, src.loc, "dst");
  if (from.size() != to.size() && from.size() != 1 && to.size() != 1) {
    fail(src.loc.where("dst"),
         fmt::format("key 'traffic.source.dst': {} sources and {} destinations do not pair up", from.size(),
                     to.size()));
  }
  const size_t n = std::max(from.size(), to.size());
  for (size_t i = 0; i < n; ++i) {
    const uint32_t a = from[from.size() == 1 ? 0 : i];
    const uint32_t b = to[to.size() == 1 ? 0 : i];
    if (a == b)
      fail(src.loc.where("dst"),
           fmt::format("key 'traffic.source.dst': a flow from '{}' to itself", topo_.host_names[a]));
    require_path(a, b);
  }
  if (check_only_) return;
  windows_ = true;
  mark_window_ = true;
  for (size_t i = 0; i < n; ++i) {
    add(from[from.size() == 1 ? 0 : i], to[to.size() == 1 ? 0 : i], src.size_bytes,
        us_to_ns(src.start_us + static_cast<double>(i) * src.stagger_us));
  }
}

void TrafficBuilder::list(const TrafficSource& src) {
  std::vector<FlowSpec> out;
  for (const ListedFlow& f : src.flows) {
    Located loc;
    loc.at = f.at;
    const uint32_t a = nics({f.src}, loc, "flows.src").at(0);
    const uint32_t b = nics({f.dst}, loc, "flows.dst").at(0);
    if (a == b) fail(f.at, fmt::format("key 'traffic.source.flows': a flow from '{}' to itself", f.src));
    require_path(a, b);
    out.push_back({a, b, f.size_bytes, us_to_ns(src.start_us + f.start_us)});
  }
  if (check_only_) return;
  windows_ = true;
  mark_window_ = true;
  for (const FlowSpec& f : out) add(f.src, f.dst, f.size_bytes, f.start_ns);
}

// Every source NIC sends size_bytes to dst at each burst time: at_us, or start_us + k·burst_interval_us.
void TrafficBuilder::incast(const TrafficSource& src) {
  const std::vector<uint32_t> to = nics(src.dst, src.loc, "dst");
  if (to.size() != 1) fail(src.loc.where("dst"), "key 'traffic.source.dst': an incast has one destination");
  const uint32_t dst = to[0];
  std::vector<uint32_t> from;
  for (uint32_t n : nics(src.src.empty() ? std::vector<std::string>{"all"} : src.src, src.loc, "src")) {
    if (topo_.machine_of[n] != topo_.machine_of[dst]) {
      require_path(n, dst);
      from.push_back(n);
    } else if (!src.src.empty()) {
      fail(src.loc.where("src"),
           fmt::format("key 'traffic.source.src': '{}' is on the destination's host", topo_.host_names[n]));
    }
  }
  if (from.empty()) fail(src.loc.where("src"), "key 'traffic.source.src': an incast needs a sender");
  if (check_only_) return;
  std::vector<double> times = src.at_us;
  for (uint32_t b = 0; src.at_us.empty() && b < src.bursts; ++b)
    times.push_back(src.start_us + b * src.burst_interval_us);
  for (double t : times) {
    for (uint32_t n : from) incast_flows_.push_back(add(n, dst, src.size_bytes, us_to_ns(t)));
  }
}

Traffic TrafficBuilder::build() {
  if (s_.traffic.sources.empty()) {
    legacy();
  } else {
    for (size_t i = 0; i < s_.traffic.sources.size(); ++i) source(s_.traffic.sources[i], i);
  }
  Traffic out;
  if (check_only_) return out;
  out.jain_windows = windows_;
  if (!windows_ || window_all_) window_flows_.clear();
  if (!any_after_) after_.clear();
  const auto by_start = [&](uint32_t x, uint32_t y) { return flows_[x].start_ns < flows_[y].start_ns; };
  const auto starts_before = [](const FlowSpec& x, const FlowSpec& y) { return x.start_ns < y.start_ns; };
  if (!std::is_sorted(flows_.begin(), flows_.end(), starts_before)) {
    // Sorted by start time, ties in generation order; every index the lists hold is renumbered.
    std::vector<uint32_t> order(flows_.size());
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), by_start);
    std::vector<uint32_t> id(flows_.size());
    for (uint32_t i = 0; i < order.size(); ++i) id[order[i]] = i;
    const auto permute = [&](auto& v) {
      std::remove_reference_t<decltype(v)> sorted;
      sorted.reserve(v.size());
      for (uint32_t old : order) sorted.push_back(v[old]);
      v = std::move(sorted);
    };
    permute(flows_);
    if (!after_.empty()) permute(after_);
    if (!window_flows_.empty()) permute(window_flows_);
    for (uint32_t& f : after_) f = f == kNoFlow ? kNoFlow : id[f];
    for (CollectiveSpec& c : collectives_) {
      for (auto& phase : c.phases) {
        for (uint32_t& f : phase) f = id[f];
      }
    }
    for (uint32_t& f : incast_flows_) f = id[f];
  }
  out.flows = std::move(flows_);
  out.after = std::move(after_);
  out.window_flows = std::move(window_flows_);
  out.collectives = std::move(collectives_);
  out.incast_flows = std::move(incast_flows_);
  return out;
}

Traffic make_traffic(const Scenario& s, const Topology& topo) {
  return TrafficBuilder(s, topo, false).build();
}

std::vector<FlowSpec> generate_traffic(const Scenario& s, const Topology& topo) {
  return make_traffic(s, topo).flows;
}

void check_traffic(const Scenario& s, const Topology& topo) { TrafficBuilder(s, topo, true).build(); }

}  // namespace rdmad::sim
