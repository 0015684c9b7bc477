#include "rdmad/sim/topology.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>

namespace rdmad::sim {
namespace {

[[noreturn]] void fail(const std::string& at, const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {}", at, what));
}

// Builds the node and link lists with hosts and switches numbered apart (a switch is kSwitch | i),
// so the lists can add hosts after a generator made its switches; finish() numbers the NICs first.
class Builder {
 public:
  static constexpr uint32_t kSwitch = 1u << 31;

  explicit Builder(const TopologyConfig& c) : c_(c) {}

  uint32_t host(const std::string& name, uint32_t nics = 1, const std::string& at = "topology") {
    Machine m{name, {}};
    for (uint32_t k = 0; k < nics; ++k) {
      m.nics.push_back(static_cast<uint32_t>(nic_names_.size()));
      nic_names_.push_back(nics == 1 ? name : fmt::format("{}.nic{}", name, k));
      nic_at_.push_back(at);
      machine_of_.push_back(static_cast<uint32_t>(machines_.size()));
    }
    machines_.push_back(std::move(m));
    return machines_.back().nics.front();
  }
  uint32_t nic(uint32_t machine, uint32_t k) const { return machines_[machine].nics[k]; }
  uint32_t add_switch(std::string name, uint64_t buffer_bytes = 0, std::string at = {}) {
    switch_names_.push_back(std::move(name));
    buffers_.push_back(buffer_bytes);
    switch_at_.push_back(std::move(at));
    return kSwitch | static_cast<uint32_t>(switch_names_.size() - 1);
  }
  // A link to a host is a host link (host rate and delay); between switches a fabric link.
  void link(uint32_t a, uint32_t b) {
    const bool fabric = (a & kSwitch) && (b & kSwitch);
    LinkSpec& l = links_.emplace_back();
    l.a = a;
    l.b = b;
    l.gbps = fabric ? c_.fabric_link_gbps : c_.host_link_gbps;
    l.delay_ns = fabric ? c_.fabric_delay() : c_.host_delay();
  }
  void bottleneck(uint32_t from, uint32_t to) { bottlenecks_.emplace_back(from, to); }
  void sender(uint32_t h) { senders_.push_back(h); }
  void receiver(uint32_t h) { receivers_.push_back(h); }

  uint32_t nic_count() const { return hosts(); }
  void add_nodes(const std::vector<NodeDef>& defs);
  void add_links(const std::vector<LinkDef>& defs);
  // Every NIC needs exactly one link (it has one port).
  void check_nics() const;
  Topology finish();

 private:
  // A name the lists may use: a NIC, a switch, or (for the error message) a multi-NIC host.
  uint32_t resolve(const std::string& name, const Located& loc, const std::string& key);
  void check_new_name(const std::string& name, const Located& loc);
  uint32_t hosts() const { return static_cast<uint32_t>(nic_names_.size()); }
  uint32_t number(uint32_t ref) const { return ref & kSwitch ? hosts() + (ref & ~kSwitch) : ref; }

  const TopologyConfig& c_;
  std::vector<std::string> nic_names_;
  std::vector<std::string> nic_at_;  // where each NIC's host was declared
  std::vector<uint32_t> machine_of_;
  std::vector<Machine> machines_;
  std::vector<std::string> switch_names_;
  std::vector<uint64_t> buffers_;
  std::vector<std::string> switch_at_;
  std::vector<LinkSpec> links_;
  std::vector<std::pair<uint32_t, uint32_t>> bottlenecks_;
  std::vector<uint32_t> senders_;
  std::vector<uint32_t> receivers_;
  std::map<std::string, uint32_t> names_;  // filled by the lists, from the generated nodes first
};

void Builder::check_new_name(const std::string& name, const Located& loc) {
  const bool ok = !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
  });
  if (!ok)
    fail(loc.where("name"),
         fmt::format("key 'topology.node.name': '{}' is not a name (letters, digits, _ and -)", name));
  bool taken = std::find(switch_names_.begin(), switch_names_.end(), name) != switch_names_.end();
  for (const Machine& m : machines_) taken = taken || m.name == name;
  for (const std::string& n : nic_names_) taken = taken || n == name;
  if (taken)
    fail(loc.where("name"), fmt::format("key 'topology.node.name': '{}' names a node already", name));
}

void Builder::add_nodes(const std::vector<NodeDef>& defs) {
  for (const NodeDef& d : defs) {
    for (uint32_t i = 0; i < std::max<uint32_t>(d.count, 1); ++i) {
      const std::string name = d.count == 0 ? d.name : fmt::format("{}{}", d.name, i);
      check_new_name(name, d.loc);
      if (d.host) {
        host(name, d.nics, d.loc.at);
      } else {
        add_switch(name, d.buffer_bytes, d.loc.where("buffer_bytes"));
      }
    }
  }
}

uint32_t Builder::resolve(const std::string& name, const Located& loc, const std::string& key) {
  if (names_.empty()) {
    for (uint32_t h = 0; h < hosts(); ++h) names_[nic_names_[h]] = h;
    for (uint32_t s = 0; s < switch_names_.size(); ++s) names_[switch_names_[s]] = kSwitch | s;
  }
  if (auto it = names_.find(name); it != names_.end()) return it->second;
  for (const Machine& m : machines_) {
    if (m.name == name) {
      fail(loc.where(key),
           fmt::format("key 'topology.link.{}': host '{}' has {} NICs: link one of them ('{}')", key, name,
                       m.nics.size(), nic_names_[m.nics[0]]));
    }
  }
  fail(loc.where(key), fmt::format("key 'topology.link.{}': no node named '{}'", key, name));
}

void Builder::add_links(const std::vector<LinkDef>& defs) {
  for (const LinkDef& d : defs) {
    std::vector<std::string> as;
    std::vector<std::string> bs;
    try {
      as = expand_range(d.a);
      bs = expand_range(d.b);
    } catch (const std::invalid_argument& e) {
      fail(d.loc.at, fmt::format("key 'topology.link': {}", e.what()));
    }
    if (as.size() != bs.size() && as.size() != 1 && bs.size() != 1) {
      fail(d.loc.at, fmt::format("key 'topology.link': ranges of {} and {} nodes do not pair up", as.size(),
                                 bs.size()));
    }
    const size_t n = std::max(as.size(), bs.size());
    for (size_t i = 0; i < n; ++i) {
      const uint32_t a = resolve(as[as.size() == 1 ? 0 : i], d.loc, "a");
      const uint32_t b = resolve(bs[bs.size() == 1 ? 0 : i], d.loc, "b");
      if (a == b) fail(d.loc.at, fmt::format("key 'topology.link': links '{}' to itself", as[0]));
      bool found = false;
      for (LinkSpec& l : links_) found = found || (l.a == a && l.b == b) || (l.a == b && l.b == a);
      if (!found) link(a, b);
      for (LinkSpec& l : links_) {
        if (!((l.a == a && l.b == b) || (l.a == b && l.b == a))) continue;
        l.gbps = d.gbps.value_or(l.gbps);
        l.delay_ns = d.delay_ns.value_or(l.delay_ns);
        l.headroom_bytes = d.headroom_bytes.value_or(l.headroom_bytes);
        l.pfc_xoff_bytes = d.pfc_xoff_bytes.value_or(l.pfc_xoff_bytes);
        l.pfc_xon_bytes = d.pfc_xon_bytes.value_or(l.pfc_xon_bytes);
        l.at = d.loc.at;
        if (l.gbps <= 0) fail(d.loc.where("gbps"), "key 'topology.link.gbps' must be positive");
      }
    }
  }
}

void Builder::check_nics() const {
  std::vector<uint32_t> degree(hosts(), 0);
  for (const LinkSpec& l : links_) {
    for (uint32_t n : {l.a, l.b}) {
      if ((n & kSwitch) == 0 && ++degree[n] > 1) {
        fail(l.at.empty() ? nic_at_[n] : l.at,
             fmt::format("key 'topology.link': NIC '{}' has a second link; a NIC has one (for more, give its "
                         "host nics = N and link each NIC)",
                         nic_names_[n]));
      }
    }
  }
  for (uint32_t h = 0; h < hosts(); ++h) {
    if (degree[h] == 0) {
      fail(nic_at_[h],
           fmt::format("key 'topology.node': NIC '{}' has no link ([[topology.link]])", nic_names_[h]));
    }
  }
}

Topology Builder::finish() {
  check_nics();
  Topology t;
  t.hosts = hosts();
  t.switches = static_cast<uint32_t>(switch_names_.size());
  for (LinkSpec l : links_) {
    l.a = number(l.a);
    l.b = number(l.b);
    t.links.push_back(std::move(l));
  }
  for (auto [from, to] : bottlenecks_) t.bottlenecks.emplace_back(number(from), number(to));
  t.host_names = std::move(nic_names_);
  t.machines = std::move(machines_);
  t.machine_of = std::move(machine_of_);
  t.switch_names = std::move(switch_names_);
  t.switch_buffer_bytes = std::move(buffers_);
  t.switch_at = std::move(switch_at_);
  t.senders = std::move(senders_);
  t.receivers = std::move(receivers_);
  return t;
}

void star(Builder& t, const TopologyConfig& c) {
  std::vector<uint32_t> hosts;
  for (uint32_t h = 0; h <= c.senders; ++h) hosts.push_back(t.host(fmt::format("host{}", h)));
  uint32_t sw = t.add_switch("sw0");
  for (uint32_t h : hosts) t.link(h, sw);
  for (uint32_t h = 0; h < c.senders; ++h) t.sender(hosts[h]);
  t.receiver(hosts[c.senders]);
  t.bottleneck(sw, hosts[c.senders]);
}

void dumbbell(Builder& t, const TopologyConfig& c) {
  for (uint32_t h = 0; h < 2 * c.senders; ++h) t.host(fmt::format("host{}", h));
  uint32_t left = t.add_switch("left");
  uint32_t right = t.add_switch("right");
  for (uint32_t h = 0; h < c.senders; ++h) {
    t.link(h, left);
    t.link(c.senders + h, right);
    t.sender(h);
    t.receiver(c.senders + h);
  }
  t.link(left, right);
  t.bottleneck(left, right);
}

void leaf_spine(Builder& t, const TopologyConfig& c) {
  const uint32_t hosts = c.leaves * c.hosts_per_leaf;
  for (uint32_t h = 0; h < hosts; ++h) t.host(fmt::format("host{}", h));
  std::vector<uint32_t> leaves;
  std::vector<uint32_t> spines;
  for (uint32_t l = 0; l < c.leaves; ++l) leaves.push_back(t.add_switch(fmt::format("leaf{}", l)));
  for (uint32_t s = 0; s < c.spines; ++s) spines.push_back(t.add_switch(fmt::format("spine{}", s)));
  for (uint32_t h = 0; h < hosts; ++h) {
    uint32_t leaf = leaves[h / c.hosts_per_leaf];
    t.link(h, leaf);
    t.bottleneck(leaf, h);
  }
  for (uint32_t l : leaves) {
    for (uint32_t s : spines) t.link(l, s);
  }
}

void fat_tree(Builder& t, const TopologyConfig& c) {
  const uint32_t k = c.fat_tree_k;
  const uint32_t half = k / 2;
  for (uint32_t h = 0; h < k * k * k / 4; ++h) t.host(fmt::format("host{}", h));
  std::vector<uint32_t> cores;
  for (uint32_t i = 0; i < half * half; ++i) cores.push_back(t.add_switch(fmt::format("core{}", i)));
  for (uint32_t pod = 0; pod < k; ++pod) {
    std::vector<uint32_t> edges;
    std::vector<uint32_t> aggs;
    for (uint32_t i = 0; i < half; ++i) edges.push_back(t.add_switch(fmt::format("edge{}_{}", pod, i)));
    for (uint32_t i = 0; i < half; ++i) aggs.push_back(t.add_switch(fmt::format("agg{}_{}", pod, i)));
    for (uint32_t e = 0; e < half; ++e) {
      for (uint32_t i = 0; i < half; ++i) {
        uint32_t host = pod * half * half + e * half + i;
        t.link(host, edges[e]);
        t.bottleneck(edges[e], host);
      }
      for (uint32_t a : aggs) t.link(edges[e], a);
    }
    // Aggregation switch i of every pod connects to cores i·k/2 … i·k/2 + k/2 − 1.
    for (uint32_t i = 0; i < half; ++i) {
      for (uint32_t j = 0; j < half; ++j) t.link(aggs[i], cores[i * half + j]);
    }
  }
}

// Rail-optimised: NIC k of every host on rail k's leaf (hosts split evenly over leaves_per_rail
// leaves per rail), every leaf linked to every spine. Same-rail traffic stays on its leaf.
void rail(Builder& t, const TopologyConfig& c) {
  for (uint32_t h = 0; h < c.hosts; ++h) t.host(fmt::format("host{}", h), c.rails);
  const uint32_t per_leaf = (c.hosts + c.leaves_per_rail - 1) / c.leaves_per_rail;
  std::vector<uint32_t> leaves;  // rail-major
  for (uint32_t k = 0; k < c.rails; ++k) {
    for (uint32_t g = 0; g < c.leaves_per_rail; ++g) {
      leaves.push_back(
          t.add_switch(c.leaves_per_rail == 1 ? fmt::format("leaf{}", k) : fmt::format("leaf{}_{}", k, g)));
    }
  }
  std::vector<uint32_t> spines;
  for (uint32_t s = 0; s < c.spines; ++s) spines.push_back(t.add_switch(fmt::format("spine{}", s)));
  for (uint32_t h = 0; h < c.hosts; ++h) {
    for (uint32_t k = 0; k < c.rails; ++k) {
      const uint32_t leaf = leaves[k * c.leaves_per_rail + h / per_leaf];
      t.link(t.nic(h, k), leaf);
      t.bottleneck(leaf, t.nic(h, k));
    }
  }
  for (uint32_t l : leaves) {
    for (uint32_t s : spines) t.link(l, s);
  }
}

// Every switch port facing a host, and the ports the scenario names.
void set_bottlenecks(Topology& t, const TopologyConfig& c, uint32_t generated_hosts) {
  if (!c.bottlenecks.empty()) {
    t.bottlenecks.clear();
    for (const std::string& port : c.bottlenecks) {
      const auto arrow = port.find("->");
      const auto from = arrow == std::string::npos ? std::nullopt : t.find_node(port.substr(0, arrow));
      const auto to = arrow == std::string::npos ? std::nullopt : t.find_node(port.substr(arrow + 2));
      const auto linked = [&](const LinkSpec& l) {
        return (l.a == *from && l.b == *to) || (l.a == *to && l.b == *from);
      };
      if (!from || !to || std::none_of(t.links.begin(), t.links.end(), linked)) {
        fail(c.bottlenecks_at,
             fmt::format("key 'topology.bottlenecks': '{}' is not a port (\"from->to\" of a link)", port));
      }
      t.bottlenecks.emplace_back(*from, *to);
    }
    return;
  }
  // Hosts the lists added: every switch port facing one.
  for (const LinkSpec& l : t.links) {
    for (auto [sw, host] : {std::pair{l.a, l.b}, std::pair{l.b, l.a}}) {
      if (sw >= t.hosts && host < t.hosts && host >= generated_hosts) t.bottlenecks.emplace_back(sw, host);
    }
  }
}

}  // namespace

const std::string& Located::where(const std::string& key) const {
  for (const auto& [k, at_key] : key_at) {
    if (k == key) return at_key;
  }
  return at;
}

std::optional<uint32_t> Topology::find_node(const std::string& name) const {
  for (uint32_t h = 0; h < hosts; ++h) {
    if (host_names[h] == name) return h;
  }
  for (uint32_t s = 0; s < switches; ++s) {
    if (switch_names[s] == name) return hosts + s;
  }
  return std::nullopt;
}

std::vector<std::string> expand_range(const std::string& name) {
  const auto dots = name.find("..");
  if (dots == std::string::npos) return {name};
  const std::string lo = name.substr(0, dots);
  const std::string hi = name.substr(dots + 2);
  auto split = [&](const std::string& s) {
    size_t digits = s.size();
    while (digits > 0 && std::isdigit(static_cast<unsigned char>(s[digits - 1]))) --digits;
    if (digits == s.size() || s.size() - digits > 9) {
      throw std::invalid_argument(fmt::format("'{}' is not a range (like \"host0..host7\")", name));
    }
    return std::pair{s.substr(0, digits), static_cast<uint32_t>(std::stoul(s.substr(digits)))};
  };
  const auto [prefix_lo, first] = split(lo);
  const auto [prefix_hi, last] = split(hi);
  if (prefix_lo != prefix_hi || last < first) {
    throw std::invalid_argument(
        fmt::format("'{}' is not a range (like \"host0..host7\": one prefix, numbers ascending)", name));
  }
  std::vector<std::string> out;
  for (uint32_t i = first; i <= last; ++i) out.push_back(prefix_lo + std::to_string(i));
  return out;
}

Topology build_topology(const TopologyConfig& cfg) {
  Builder b(cfg);
  switch (cfg.kind) {
    case TopologyKind::kStar:
      star(b, cfg);
      break;
    case TopologyKind::kDumbbell:
      dumbbell(b, cfg);
      break;
    case TopologyKind::kLeafSpine:
      leaf_spine(b, cfg);
      break;
    case TopologyKind::kFatTree:
      fat_tree(b, cfg);
      break;
    case TopologyKind::kRail:
      rail(b, cfg);
      break;
    case TopologyKind::kCustom:
      break;
  }
  const uint32_t generated_hosts = b.nic_count();
  b.add_nodes(cfg.nodes);
  b.add_links(cfg.links);
  Topology t = b.finish();
  set_bottlenecks(t, cfg, generated_hosts);
  return t;
}

}  // namespace rdmad::sim
