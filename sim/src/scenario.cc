#include "rdmad/sim/scenario.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

namespace rdmad::sim {
namespace {

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {}", origin, what));
}

// Typed lookups that remember which keys were read, so leftovers can be reported as unknown.
class Reader {
 public:
  Reader(const toml::table& root, std::string origin) : root_(root), origin_(std::move(origin)) {}

  template <typename T>
  void get(const std::string& key, T& out) {
    used_.insert(key);
    toml::node_view<const toml::node> node = root_.at_path(key);
    if (!node) return;
    if constexpr (std::is_same_v<T, bool>) {
      if (auto v = node.value_exact<bool>()) return void(out = *v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (auto v = node.value_exact<std::string>()) return void(out = *v);
    } else if constexpr (std::is_floating_point_v<T>) {
      if (auto v = node.value<double>()) return void(out = static_cast<T>(*v));
    } else {
      if (auto v = node.value_exact<int64_t>(); v && *v >= 0) return void(out = static_cast<T>(*v));
    }
    fail(where(node), fmt::format("key '{}' has the wrong type or range", key));
  }

  // "file:line" of a key, or the file when the key is not in it.
  std::string where_key(const std::string& key) const {
    toml::node_view<const toml::node> node = root_.at_path(key);
    return node ? where(node) : origin_;
  }

  std::string where(toml::node_view<const toml::node> node) const {
    const auto& src = node.node()->source();
    return src.begin ? fmt::format("{}:{}", origin_, src.begin.line) : origin_;
  }

  // An array of tables ([[key]]): each element, or none when absent; each element's keys are taken
  // by the caller, which must read them all.
  const toml::array* array(const std::string& key) {
    used_.insert(key);
    toml::node_view<const toml::node> node = root_.at_path(key);
    if (!node) return nullptr;
    if (const auto* a = node.as_array()) return a;
    fail(where(node), fmt::format("key '{}' must be an array of tables ([[{}]])", key, key));
  }

  // Keys under `prefix` (a table) that were read through the knob table, not get().
  void mark_used_prefix(const std::string& prefix) { used_prefixes_.push_back(prefix); }

  void reject_unknown() const { walk(root_, ""); }

 private:
  void walk(const toml::table& t, const std::string& prefix) const {
    for (const auto& [k, v] : t) {
      std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
      if (const auto* sub = v.as_table()) {
        walk(*sub, key);
        continue;
      }
      bool ok = used_.count(key) > 0;
      for (const auto& p : used_prefixes_) ok = ok || key.rfind(p + ".", 0) == 0;
      if (!ok) {
        const auto& src = v.source();
        fail(src.begin ? fmt::format("{}:{}", origin_, src.begin.line) : origin_,
             fmt::format("unknown key '{}' (see docs/simulator.md)", key));
      }
    }
  }
  const toml::table& root_;
  std::string origin_;
  std::set<std::string> used_;
  std::vector<std::string> used_prefixes_;
};

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
    t = node->as_table();
    if (t == nullptr) fail("--set", fmt::format("'{}' is not a table", key.substr(0, dot)));
  }
  t->insert_or_assign(key.substr(start), *parsed.get("v"));
}

template <typename E>
E parse_enum(Reader& r, const std::string& key, const std::vector<std::pair<std::string, E>>& names, E def) {
  std::string s;
  r.get(key, s);
  if (s.empty()) return def;
  for (const auto& [n, e] : names) {
    if (n == s) return e;
  }
  fail("scenario", fmt::format("key '{}': unknown value '{}'", key, s));
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
  t.kind = parse_enum<TopologyKind>(r, "topology.kind",
                                    {{"star", TopologyKind::kStar},
                                     {"dumbbell", TopologyKind::kDumbbell},
                                     {"leafspine", TopologyKind::kLeafSpine},
                                     {"fattree", TopologyKind::kFatTree}},
                                    TopologyKind::kStar);
  r.get("topology.senders", t.senders);
  r.get("topology.leaves", t.leaves);
  r.get("topology.spines", t.spines);
  r.get("topology.hosts_per_leaf", t.hosts_per_leaf);
  r.get("topology.k", t.fat_tree_k);
  r.get("topology.host_link_gbps", t.host_link_gbps);
  r.get("topology.fabric_link_gbps", t.fabric_link_gbps);
  r.get("topology.link_delay_ns", t.link_delay_ns);

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
  f.kind = parse_enum<TrafficKind>(r, "traffic.kind",
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
  std::string cdf;
  r.get("traffic.cdf", cdf);
  if (!cdf.empty())
    f.cdf = std::filesystem::path(cdf).is_absolute() ? std::filesystem::path(cdf) : base_dir / cdf;
  r.get("traffic.flow_count", f.flow_count);

  s.transport.acks = parse_enum<AckMode>(
      r, "transport.acks", {{"auto", AckMode::kAuto}, {"on", AckMode::kOn}, {"off", AckMode::kOff}},
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
  if (f.kind == TrafficKind::kPoisson && (f.cdf.empty() || f.load <= 0 || f.load > 1)) {
    fail(origin, "traffic.kind = \"poisson\" needs traffic.cdf and 0 < traffic.load <= 1");
  }
  if (t.kind == TopologyKind::kFatTree && (t.fat_tree_k < 2 || t.fat_tree_k % 2 != 0)) {
    fail(origin, "topology.k must be even and at least 2");
  }
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
