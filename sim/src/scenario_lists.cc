// The scenario's lists: [[topology.node]], [[topology.link]] and [[traffic.source]] (with the flow
// lines of a `list` source, inline or from a CSV file). Each entry is read with its own Reader, so an
// unknown or mistyped key names the entry's file and line.
#include <algorithm>
#include <fstream>
#include <sstream>

#include "scenario_reader.h"

namespace rdmad::sim {
namespace {

const std::vector<std::string> kLinkKeys = {
    "a", "b", "gbps", "delay_ns", "headroom_bytes", "pfc_xoff_bytes", "pfc_xon_bytes"};

NodeDef read_node(Reader& e) {
  NodeDef d;
  e.get("name", d.name);
  d.host = e.get_enum<bool>("kind", {{"host", true}, {"switch", false}}, true);
  e.get("count", d.count);
  e.get("nics", d.nics);
  e.get("buffer_bytes", d.buffer_bytes);
  d.loc = e.locate({"name", "kind", "count", "nics", "buffer_bytes"});
  if (d.name.empty()) fail(d.loc.at, "key 'topology.node.name' is required");
  if (d.nics == 0 || (!d.host && e.has("nics"))) {
    fail(d.loc.where("nics"), "key 'topology.node.nics': a host has 1 or more NICs (switches have none)");
  }
  if (d.host && e.has("buffer_bytes")) {
    fail(d.loc.where("buffer_bytes"), "key 'topology.node.buffer_bytes' is a switch's");
  }
  e.reject_unknown("a node has name, kind, count, nics, buffer_bytes");
  return d;
}

LinkDef read_link(Reader& e) {
  LinkDef d;
  e.get("a", d.a);
  e.get("b", d.b);
  e.get("gbps", d.gbps);
  e.get("delay_ns", d.delay_ns);
  e.get("headroom_bytes", d.headroom_bytes);
  e.get("pfc_xoff_bytes", d.pfc_xoff_bytes);
  e.get("pfc_xon_bytes", d.pfc_xon_bytes);
  d.loc = e.locate(kLinkKeys);
  if (d.a.empty() || d.b.empty()) fail(d.loc.at, "keys 'topology.link.a' and 'topology.link.b' are required");
  e.reject_unknown("a link has a, b, gbps, delay_ns, headroom_bytes, pfc_xoff_bytes, pfc_xon_bytes");
  return d;
}

// One line of a `list` source, from TOML ({src, dst, size_bytes, start_us}).
ListedFlow read_listed(Reader& e) {
  ListedFlow f;
  e.get("src", f.src);
  e.get("dst", f.dst);
  e.get("size_bytes", f.size_bytes);
  e.get("start_us", f.start_us);
  f.at = e.where_table();
  if (f.src.empty() || f.dst.empty() || f.size_bytes == 0) {
    fail(f.at, "key 'traffic.source.flows': each flow needs src, dst and size_bytes > 0");
  }
  e.reject_unknown("a flow has src, dst, size_bytes, start_us");
  return f;
}

// The lines of a flow file: "src,dst,size_bytes,start_us" per line, an optional header of those
// names, '#' comments.
void read_flow_file(const std::filesystem::path& path, const std::string& at, std::vector<ListedFlow>& out) {
  std::ifstream in(path);
  if (!in) fail(at, fmt::format("key 'traffic.source.file': cannot read '{}'", path.string()));
  std::string line;
  for (uint32_t n = 1; std::getline(in, line); ++n) {
    const std::string here = fmt::format("{}:{}", path.string(), n);
    if (line.empty() || line[0] == '#' || line.rfind("src,", 0) == 0) continue;
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cols.push_back(c);
    ListedFlow f;
    f.at = here;
    try {
      if (cols.size() != 4) throw std::invalid_argument("columns");
      size_t used = 0;
      f.src = cols[0];
      f.dst = cols[1];
      f.size_bytes = std::stoull(cols[2], &used);
      if (used != cols[2].size() || f.size_bytes == 0) throw std::invalid_argument("size");
      f.start_us = std::stod(cols[3], &used);
      if (used != cols[3].size() || f.start_us < 0) throw std::invalid_argument("start");
    } catch (const std::exception&) {
      fail(here, "expected src,dst,size_bytes,start_us (size_bytes > 0, start_us >= 0)");
    }
    out.push_back(std::move(f));
  }
}

// The keys each kind of source takes besides kind, name and start_us.
struct KindKeys {
  SourceKind kind;
  const char* name;
  std::vector<std::string> keys;
};
const std::vector<KindKeys> kSourceKinds = {
    {SourceKind::kFlows, "flows", {"src", "dst", "size_bytes", "stagger_us"}},
    {SourceKind::kList, "list", {"flows", "file"}},
    {SourceKind::kIncast, "incast", {"src", "dst", "size_bytes", "at_us", "bursts", "burst_interval_us"}},
    {SourceKind::kPoisson, "poisson", {"hosts", "dst", "cdf", "load", "flow_count"}},
    {SourceKind::kAllReduce, "allreduce", {"hosts", "size_bytes", "algorithm"}},
    {SourceKind::kAllToAll, "alltoall", {"hosts", "size_bytes"}},
};

TrafficSource read_source(Reader& e, const std::string& origin, const std::filesystem::path& base_dir,
                          size_t index) {
  TrafficSource src;
  if (!e.has("kind")) fail(e.where_table(), "key 'traffic.source.kind' is required");
  std::vector<std::pair<std::string, SourceKind>> names;
  for (const auto& k : kSourceKinds) names.emplace_back(k.name, k.kind);
  src.kind = e.get_enum<SourceKind>("kind", names, SourceKind::kFlows);
  const KindKeys& kind = kSourceKinds[static_cast<size_t>(src.kind)];
  const auto takes = [&](const char* key) {
    return std::find(kind.keys.begin(), kind.keys.end(), key) != kind.keys.end();
  };
  e.get("start_us", src.start_us);
  if (takes("src")) e.get_names("src", src.src);
  if (takes("dst")) e.get_names("dst", src.dst);
  if (takes("hosts")) e.get_names("hosts", src.hosts);
  if (takes("size_bytes")) e.get("size_bytes", src.size_bytes);
  if (takes("stagger_us")) e.get("stagger_us", src.stagger_us);
  if (takes("at_us")) e.get_numbers("at_us", src.at_us);
  if (takes("bursts")) e.get("bursts", src.bursts);
  if (takes("burst_interval_us")) e.get("burst_interval_us", src.burst_interval_us);
  if (takes("cdf")) e.get_path("cdf", base_dir, src.cdf);
  if (takes("load")) e.get("load", src.load);
  if (takes("flow_count")) e.get("flow_count", src.flow_count);
  if (takes("algorithm")) {
    src.algorithm = e.get_enum<CollectiveAlgorithm>(
        "algorithm",
        {{"ring", CollectiveAlgorithm::kRing}, {"halving_doubling", CollectiveAlgorithm::kHalvingDoubling}},
        CollectiveAlgorithm::kRing);
  }
  const bool collective = src.kind == SourceKind::kAllReduce || src.kind == SourceKind::kAllToAll;
  if (collective) {
    src.name = fmt::format("{}{}", kind.name, index);
    e.get("name", src.name);
  }
  src.loc = e.locate({"kind", "name", "src", "dst", "hosts", "size_bytes", "start_us", "at_us", "cdf", "load",
                      "flow_count", "flows", "file", "algorithm"});
  if (takes("flows")) {
    for (const toml::table* t : e.tables("flows")) {
      Reader line(*t, origin, "traffic.source.flows");
      src.flows.push_back(read_listed(line));
    }
    std::filesystem::path file;
    e.get_path("file", base_dir, file);
    if (!file.empty()) read_flow_file(file, src.loc.where("file"), src.flows);
  }
  std::string hint = fmt::format("a '{}' source has kind, start_us", kind.name);
  for (const std::string& k : kind.keys) hint += ", " + k;
  if (collective) hint += ", name";
  e.reject_unknown(hint);

  // What each kind needs.
  auto need = [&](bool ok, const char* key, const char* what) {
    if (!ok)
      fail(src.loc.where(key),
           fmt::format("key 'traffic.source.{}': a '{}' source {}", key, kind.name, what));
  };
  switch (src.kind) {
    case SourceKind::kFlows:
      need(!src.src.empty() && !src.dst.empty(), "src", "needs src and dst");
      break;
    case SourceKind::kList:
      need(!src.flows.empty(), "flows", "needs flows = [{src, dst, size_bytes, start_us}, ...] or file");
      break;
    case SourceKind::kIncast:
      need(src.dst.size() == 1, "dst", "needs one dst");
      need(src.size_bytes > 0, "size_bytes", "needs size_bytes > 0");
      need(src.bursts > 0, "bursts", "needs bursts >= 1");
      break;
    case SourceKind::kPoisson:
      need(!src.cdf.empty(), "cdf", "needs a flow-size cdf file");
      need(src.load > 0 && src.load <= 1, "load", "needs 0 < load <= 1");
      need(src.flow_count > 0, "flow_count", "needs flow_count > 0");
      break;
    case SourceKind::kAllReduce:
    case SourceKind::kAllToAll:
      need(src.size_bytes > 0, "size_bytes", "needs size_bytes > 0");
      break;
  }
  if (src.hosts.empty() && (src.kind == SourceKind::kPoisson || collective)) src.hosts = {"all"};
  return src;
}

}  // namespace

void read_topology_lists(Reader& r, const std::string& origin, TopologyConfig& t) {
  for (const toml::table* n : r.tables("topology.node")) {
    Reader e(*n, origin, "topology.node");
    t.nodes.push_back(read_node(e));
  }
  for (const toml::table* l : r.tables("topology.link")) {
    Reader e(*l, origin, "topology.link");
    t.links.push_back(read_link(e));
  }
}

void read_traffic_sources(Reader& r, const std::string& origin, const std::filesystem::path& base_dir,
                          TrafficConfig& t) {
  for (const toml::table* n : r.tables("traffic.source")) {
    Reader e(*n, origin, "traffic.source");
    t.sources.push_back(read_source(e, origin, base_dir, t.sources.size()));
  }
  if (t.sources.empty()) return;
  // The single source of the [traffic] table and a list of sources do not mix.
  for (const char* key : {"kind", "flows", "start_us", "stagger_us", "size_bytes", "bursts",
                          "burst_interval_us", "load", "cdf", "flow_count"}) {
    const std::string full = std::string("traffic.") + key;
    if (r.has(full)) {
      fail(r.where_key(full), fmt::format("key '{}' describes the single source of [traffic]; with "
                                          "[[traffic.source]] entries, give it to one of them",
                                          full));
    }
  }
}

}  // namespace rdmad::sim
