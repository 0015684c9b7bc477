#include "rdmad/sim/scenario.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "rdmad/sim/topology.h"
#include "rdmad/sim/traffic.h"
#include "scenario_reader.h"

namespace rdmad::sim {
namespace {

void apply_override(toml::table& root, const std::string& assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    fail("--set", fmt::format("expected key=value, got '{}'", assignment));
  std::string key = assignment.substr(0, eq);
  std::string value = assignment.substr(eq + 1);
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    parsed.insert_or_assign("v", value);  // a bare word is a string
  }
  toml::table* t = &root;
  size_t start = 0;
  for (size_t dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1) {
    std::string part = key.substr(start, dot - start);
    auto* node = t->get(part);
    if (node == nullptr) node = &t->insert_or_assign(part, toml::table{}).first->second;
    // An entry of a [[list]] by its index: traffic.source.1.load=0.5.
    if (auto* list = node->as_array()) {
      const size_t next = key.find('.', dot + 1);
      const std::string index = key.substr(dot + 1, next == std::string::npos ? next : next - dot - 1);
      const bool number = !index.empty() && index.find_first_not_of("0123456789") == std::string::npos;
      if (next == std::string::npos || !number || std::stoul(index) >= list->size()) {
        fail("--set", fmt::format("'{}': {} has {} entries; name one by its index ({}.0.KEY)", key,
                                  key.substr(0, dot), list->size(), key.substr(0, dot)));
      }
      node = list->get(std::stoul(index));
      dot = next;
    }
    t = node->as_table();
    if (t == nullptr) fail("--set", fmt::format("'{}' is not a table", key.substr(0, dot)));
  }
  t->insert_or_assign(key.substr(start), *parsed.get("v"));
}

// One [[loss.drop]] entry: {flow = N, psn = K, kind = "data" | "ack"}.
InjectedLoss parse_drop(const toml::node& n, const std::string& origin) {
  const auto* t = n.as_table();
  const std::string at = n.source().begin ? fmt::format("{}:{}", origin, n.source().begin.line) : origin;
  if (t == nullptr) fail(at, "key 'loss.drop': each entry is a table {flow, psn, kind}");
  InjectedLoss d;
  for (const auto& [k, v] : *t) {
    auto int_value = [&] {
      auto x = v.value_exact<int64_t>();
      if (!x || *x < 0 || *x > UINT32_MAX)
        fail(at, fmt::format("key 'loss.drop.{}' needs a whole number", k.str()));
      return static_cast<uint32_t>(*x);
    };
    if (k.str() == "flow") {
      d.flow = int_value();
    } else if (k.str() == "psn") {
      d.psn = int_value();
    } else if (k.str() == "kind") {
      auto kind = v.value_exact<std::string>();
      if (!kind || (*kind != "data" && *kind != "ack"))
        fail(at, "key 'loss.drop.kind' is \"data\" or \"ack\"");
      d.kind = *kind == "ack" ? LossKind::kAck : LossKind::kData;
    } else {
      fail(at, fmt::format("unknown key 'loss.drop.{}' (flow, psn, kind)", k.str()));
    }
  }
  return d;
}

}  // namespace

Scenario parse_scenario(std::string_view text, const std::filesystem::path& base_dir,
                        const std::vector<std::string>& overrides, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    fail(fmt::format("{}:{}", origin, e.source().begin.line), std::string(e.description()));
  }
  for (const auto& o : overrides) apply_override(root, o);

  Scenario s;
  Reader r(root, origin);
  r.get("name", s.name);
  r.get("sim.seed", s.seed);
  r.get("sim.duration_ms", s.duration_ms);
  r.get("sim.warmup_ms", s.warmup_ms);
  r.get("sim.sample_interval_us", s.sample_interval_us);
  r.get("sim.mtu_bytes", s.mtu_bytes);
  r.get("sim.header_bytes", s.header_bytes);
  r.get("sim.cnp_bytes", s.cnp_bytes);
  r.get("sim.progress", s.progress);

  auto& t = s.topology;
  // Without a kind, a file that lists its nodes is a custom topology.
  t.kind = r.get_enum<TopologyKind>("topology.kind",
                                    {{"star", TopologyKind::kStar},
                                     {"dumbbell", TopologyKind::kDumbbell},
                                     {"leafspine", TopologyKind::kLeafSpine},
                                     {"fattree", TopologyKind::kFatTree},
                                     {"rail", TopologyKind::kRail},
                                     {"custom", TopologyKind::kCustom}},
                                    r.has("topology.node") ? TopologyKind::kCustom : TopologyKind::kStar);
  r.get("topology.senders", t.senders);
  r.get("topology.leaves", t.leaves);
  r.get("topology.spines", t.spines);
  r.get("topology.hosts_per_leaf", t.hosts_per_leaf);
  r.get("topology.k", t.fat_tree_k);
  r.get("topology.host_link_gbps", t.host_link_gbps);
  r.get("topology.fabric_link_gbps", t.fabric_link_gbps);
  r.get("topology.link_delay_ns", t.link_delay_ns);
  r.get("topology.host_link_delay_ns", t.host_link_delay_ns);
  r.get("topology.fabric_link_delay_ns", t.fabric_link_delay_ns);
  r.get("topology.hosts", t.hosts);
  r.get("topology.rails", t.rails);
  r.get("topology.leaves_per_rail", t.leaves_per_rail);
  r.get_names("topology.bottlenecks", t.bottlenecks);
  t.bottlenecks_at = r.where_key("topology.bottlenecks");
  read_topology_lists(r, origin, t);

  auto& w = s.sw;
  r.get("switch.buffer_bytes", w.buffer_bytes);
  r.get("switch.dt_alpha", w.dt_alpha);
  r.get("switch.pfc", w.pfc);
  r.get("switch.pfc_alpha", w.pfc_alpha);
  r.get("switch.headroom_bytes", w.headroom_bytes);
  r.get("switch.xon_offset_bytes", w.xon_offset_bytes);
  r.get("switch.pfc_xoff_bytes", w.pfc_xoff_bytes);
  r.get("switch.pfc_xon_bytes", w.pfc_xon_bytes);
  w.buffer_bytes_at = r.where_key("switch.buffer_bytes");
  w.headroom_bytes_at = r.where_key("switch.headroom_bytes");
  if (w.pfc_xon_bytes != 0 && w.pfc_xon_bytes >= w.pfc_xoff_bytes) {
    fail(r.where_key("switch.pfc_xon_bytes"),
         fmt::format("key 'switch.pfc_xon_bytes' ({}) must be below switch.pfc_xoff_bytes ({}; 0 = dynamic)",
                     w.pfc_xon_bytes, w.pfc_xoff_bytes));
  }
  r.get("switch.ecn", w.ecn);
  r.get("switch.kmin_bytes", w.kmin_bytes);
  r.get("switch.kmax_bytes", w.kmax_bytes);
  r.get("switch.pmax", w.pmax);

  auto& f = s.traffic;
  f.kind = r.get_enum<TrafficKind>("traffic.kind",
                                   {{"long", TrafficKind::kLongFlows},
                                    {"incast", TrafficKind::kIncast},
                                    {"poisson", TrafficKind::kPoisson}},
                                   TrafficKind::kLongFlows);
  r.get("traffic.flows", f.flows);
  r.get("traffic.start_us", f.start_us);
  r.get("traffic.stagger_us", f.stagger_us);
  r.get("traffic.size_bytes", f.size_bytes);
  r.get("traffic.bursts", f.bursts);
  r.get("traffic.burst_interval_us", f.burst_interval_us);
  r.get("traffic.load", f.load);
  r.get_path("traffic.cdf", base_dir, f.cdf);
  r.get("traffic.flow_count", f.flow_count);
  read_traffic_sources(r, origin, base_dir, f);

  s.transport.acks = r.get_enum<AckMode>(
      "transport.acks", {{"auto", AckMode::kAuto}, {"on", AckMode::kOn}, {"off", AckMode::kOff}},
      AckMode::kAuto);
  r.get("transport.retransmit_timeout_us", s.transport.retransmit_timeout_us);
  r.get("loss.rate", s.loss.rate);
  if (s.loss.rate < 0 || s.loss.rate >= 1)
    fail(r.where_key("loss.rate"), "key 'loss.rate' must be in [0, 1)");
  if (const toml::array* drops = r.array("loss.drop")) {
    for (const toml::node& n : *drops) s.loss.drops.push_back(parse_drop(n, origin));
  }

  r.get("output.max_rate_flows", s.output.max_rate_flows);
  r.get("output.jain_window_ms", s.output.jain_window_ms);
  r.get("output.series_samples", s.output.series_samples);
  if (s.output.series_samples < 2)
    fail(r.where_key("output.series_samples"), "key 'output.series_samples' must be at least 2");
  s.output.series_samples += s.output.series_samples % 2;

  r.get("cc.enabled", s.cc_enabled);
  r.get("cc.profile", s.cc_profile);
  auto profile = cc::profile_by_name(s.cc_profile);
  if (!profile)
    fail(origin, fmt::format("key 'cc.profile': unknown profile '{}' (paper, mlx5)", s.cc_profile));
  s.dcqcn = *profile;
  // [cc.knobs]: any mlx5 knob by its vendor or debugfs name, in the knob's own units.
  if (const auto* knobs = root.at_path("cc.knobs").as_table()) {
    for (const auto& [k, v] : *knobs) {
      const cc::Mlx5Knob* knob = cc::find_mlx5_knob(k.str());
      auto value = v.value_exact<int64_t>();
      if (knob == nullptr) fail(origin, fmt::format("key 'cc.knobs.{}': not an mlx5 DCQCN knob", k.str()));
      if (!value || *value < knob->min || *value > knob->max) {
        fail(origin, fmt::format("key 'cc.knobs.{}': needs an integer in [{}, {}] ({})", k.str(), knob->min,
                                 knob->max, knob->unit));
      }
      knob->set(s.dcqcn, *value);
    }
    r.mark_used_prefix("cc.knobs");
  }
  r.reject_unknown();

  if (s.transport.retransmit_timeout_us <= 0) {
    fail(r.where_key("transport.retransmit_timeout_us"),
         "key 'transport.retransmit_timeout_us' must be positive");
  }
  if (s.duration_ms <= 0 || s.sample_interval_us <= 0 || s.mtu_bytes == 0) {
    fail(origin, "sim.duration_ms, sim.sample_interval_us and sim.mtu_bytes must be positive");
  }
  if (w.kmax_bytes < w.kmin_bytes || w.pmax < 0 || w.pmax > 1) {
    fail(origin, "switch: need kmin_bytes <= kmax_bytes and 0 <= pmax <= 1");
  }
  if (f.sources.empty() && f.kind == TrafficKind::kPoisson && (f.cdf.empty() || f.load <= 0 || f.load > 1)) {
    fail(origin, "traffic.kind = \"poisson\" needs traffic.cdf and 0 < traffic.load <= 1");
  }
  if (t.kind == TopologyKind::kFatTree && (t.fat_tree_k < 2 || t.fat_tree_k % 2 != 0)) {
    fail(r.where_key("topology.k"), "key 'topology.k' must be even and at least 2");
  }
  if (t.kind == TopologyKind::kRail &&
      (t.hosts == 0 || t.rails == 0 || t.leaves_per_rail == 0 || t.leaves_per_rail > t.hosts)) {
    fail(r.where_key("topology.kind"),
         "topology.kind = \"rail\" needs topology.hosts, topology.rails >= 1 and 1 <= leaves_per_rail <= "
         "hosts");
  }
  // Names in links and traffic sources refer to the built topology: check them now, so a typo is an
  // error of the file, not of a run.
  const Topology topo = build_topology(t);
  if (topo.hosts < 2) {
    fail(r.where_key("topology.kind"),
         "the topology needs two hosts or more ([[topology.node]], [[topology.link]])");
  }
  check_traffic(s, topo);
  return s;
}

Scenario load_scenario(const std::filesystem::path& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("cannot read scenario '{}'", path.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  Scenario s = parse_scenario(ss.str(), path.parent_path(), overrides, path.string());
  if (s.name.empty()) s.name = path.stem().string();
  return s;
}

}  // namespace rdmad::sim
