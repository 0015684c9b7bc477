// The figures the advisor judges a run by, read back from the files rdmad-sim wrote.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "json_value.h"
#include "rdmad/sim/results.h"
#include "rdmad/sim/tune_runner.h"

namespace rdmad::sim::tune {
namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read '{}'", p.string()));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

double need(const JsonValue& j, std::string_view key, const std::filesystem::path& file) {
  const JsonValue* v = j.get(key);
  if (v == nullptr || !v->number()) throw std::runtime_error(fmt::format("'{}': no number '{}'", file.string(), key));
  return *v->number();
}

// The slowdown column of fct.csv for every finished flow.
std::vector<double> slowdowns(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error(fmt::format("cannot read '{}'", file.string()));
  std::vector<double> out;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    const size_t comma = line.rfind(',');
    if (comma == std::string::npos || comma + 1 == line.size()) continue;  // unfinished: empty slowdown
    out.push_back(std::stod(line.substr(comma + 1)));
  }
  return out;
}

}  // namespace

std::vector<std::string> objective_names() {
  return {"p99", "p95", "p50", "mean", "max_bucket_p99", "p99:<10KB", "p99:10KB-100KB", "p99:100KB-1MB",
          "p99:1MB-10MB", "p99:>=10MB", "collective", "collective:NAME"};
}

Metrics read_run_metrics(const std::filesystem::path& dir) {
  const auto summary_file = dir / "summary.json";
  const JsonValue s = JsonValue::parse(slurp(summary_file));
  Metrics m;
  m["utilization"] = need(s, "bottleneck_utilization", summary_file);
  m["goodput"] = need(s, "bottleneck_goodput", summary_file);
  m["drops"] = need(s, "drops", summary_file);
  m["pfc_pauses"] = need(s, "pfc_pauses", summary_file);
  m["flows_unfinished"] = need(s, "flows_total", summary_file) - need(s, "flows_completed", summary_file);
  if (const JsonValue* q = s.get("queue_bytes")) {
    m["queue_p99"] = need(*q, "p99", summary_file);
    m["queue_max"] = need(*q, "max", summary_file);
  }
  if (const JsonValue* buckets = s.get("fct_slowdown")) {
    double worst = 0;
    for (const char* label : {"<10KB", "10KB-100KB", "100KB-1MB", "1MB-10MB", ">=10MB"}) {
      const JsonValue* b = buckets->get(label);
      if (b == nullptr) continue;
      for (const char* p : {"p50", "p95", "p99"}) {
        const JsonValue* v = b->get(p);
        if (v != nullptr && v->number()) m[fmt::format("{}:{}", p, label)] = *v->number();
      }
      if (const JsonValue* v = b->get("p99"); v != nullptr && v->number()) worst = std::max(worst, *v->number());
    }
    m["max_bucket_p99"] = worst;
  }
  if (const JsonValue* list = s.get("collectives"); list != nullptr && list->array() != nullptr) {
    double slowest = 0;
    bool all = !list->array()->empty();
    for (const JsonValue& c : *list->array()) {
      const JsonValue* name = c.get("name");
      const JsonValue* t = c.get("completion_us");
      if (t == nullptr || !t->number()) {
        all = false;
        continue;
      }
      if (name != nullptr && name->string() != nullptr) m["collective:" + *name->string()] = *t->number();
      slowest = std::max(slowest, *t->number());
    }
    if (all) m["collective"] = slowest;
  }
  std::vector<double> sd = slowdowns(dir / "fct.csv");
  if (!sd.empty()) {
    double sum = 0;
    for (double v : sd) sum += v;
    m["mean"] = sum / static_cast<double>(sd.size());
    const Percentiles p = percentiles(sd);
    m["p50"] = p.p50;
    m["p95"] = p.p95;
    m["p99"] = p.p99;
  }
  return m;
}

}  // namespace rdmad::sim::tune
