// The advisor's search (docs/tuning.md, "Search"): a Latin hypercube, rounds of local refinement
// around the best feasible candidates, and a validation of the finalists on held-out seeds.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <stdexcept>

#include "rdmad/sim/rng.h"
#include "rdmad/sim/tune.h"

namespace rdmad::sim::tune {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool is_worst_case(std::string_view name) {
  return name == "drops" || name == "pfc_pauses" || name == "queue_p99" || name == "queue_max";
}

double objective_of(const Metrics& m, const std::string& name) {
  const auto it = m.find(name);
  return it == m.end() || !std::isfinite(it->second) ? kInf : it->second;
}

double metric(const Metrics& m, std::string_view name, double missing) {
  const auto it = m.find(name);
  return it == m.end() ? missing : it->second;
}

class Search {
 public:
  Search(const SearchOptions& o, Evaluator& e, const std::function<void(const std::string&)>& log)
      : o_(o), eval_(e), log_(log), rng_(o.seed) {
    if (o_.space.empty()) throw std::invalid_argument("tune: the knob space is empty");
    if (o_.sim_seeds.empty()) throw std::invalid_argument("tune: no simulation seed");
    for (uint64_t v : o_.validation_seeds)
      if (std::find(o_.sim_seeds.begin(), o_.sim_seeds.end(), v) != o_.sim_seeds.end())
        throw std::invalid_argument(fmt::format("tune: validation seed {} is also a tuning seed", v));
  }

  TuneResult run() {
    Candidate base = make({}, -1);
    for (size_t d = 0; d < o_.space.size(); ++d) base.values.push_back(o_.space[d].knob->get(o_.baseline));
    base.params = o_.baseline;
    std::vector<Candidate*> batch{&base};
    evaluate(batch);
    // A baseline that fails, or has no such objective, would make every comparison meaningless.
    for (const RunOutcome& r : base.runs)
      if (!r.ok) throw std::runtime_error("tune: the mlx5 defaults' run failed: " + r.error);
    if (!std::isfinite(base.objective)) {
      std::vector<std::string> names;
      for (const auto& m : base.runs.front().metrics) names.push_back(m.first);
      throw std::runtime_error(fmt::format("tune: the runs have no objective '{}' (they have: {})", o_.objective,
                                           fmt::join(names, " ")));
    }
    result_.baseline = base;
    judge(result_.baseline);
    say(fmt::format("baseline (mlx5 defaults): {} = {}{}", o_.objective, fmt::format("{:.4g}", result_.baseline.objective),
                    result_.baseline.feasible ? "" : fmt::format(" (breaks {})", fmt::join(result_.baseline.broken, ", "))));
    // Space-filling start.
    std::vector<Candidate> start;
    for (const auto& x : latin_hypercube(o_.initial)) add(start, positions_to_values(x), 0);
    run_round(start, 0);
    // Local refinement: perturb the best feasible candidates; a round that does not improve
    // the best halves the step.
    double step = o_.step;
    for (uint32_t r = 1; r <= o_.rounds; ++r) {
      const double before = best_objective();
      std::vector<Candidate> round;
      const auto parents = ranked(o_.parents);
      for (uint32_t i = 0; i < o_.per_round && !parents.empty(); ++i)
        add(round, perturb(*parents[i % parents.size()], step), static_cast<int>(r));
      run_round(round, static_cast<int>(r));
      const double after = best_objective();
      if (!(after < before)) step /= 2;
      say(fmt::format("round {}: {} candidates, best {} = {:.4g}, step {:.3g}", r, round.size(), o_.objective, after, step));
    }
    validate();
    return std::move(result_);
  }

 private:
  void say(const std::string& line) {
    if (log_) log_(line);
  }

  Candidate make(std::vector<int64_t> values, int round) {
    Candidate c;
    c.id = next_id_++;
    c.round = round;
    c.values = std::move(values);
    c.params = o_.baseline;
    for (size_t d = 0; d < c.values.size(); ++d) o_.space[d].knob->set(c.params, c.values[d]);
    return c;
  }

  // Adds a candidate unless one with the same knob values exists (a rounded repeat costs a run).
  void add(std::vector<Candidate>& to, std::vector<int64_t> values, int round) {
    if (!seen_.insert(values).second) return;
    to.push_back(make(std::move(values), round));
  }

  std::vector<std::vector<double>> latin_hypercube(uint32_t n) {
    const size_t dims = o_.space.size();
    std::vector<std::vector<double>> x(n, std::vector<double>(dims));
    for (size_t d = 0; d < dims; ++d) {
      std::vector<uint32_t> perm(n);
      std::iota(perm.begin(), perm.end(), 0u);
      for (uint32_t i = n; i > 1; --i) std::swap(perm[i - 1], perm[rng_.below(i)]);
      for (uint32_t i = 0; i < n; ++i) x[i][d] = (perm[i] + rng_.uniform()) / n;
    }
    return x;
  }

  std::vector<int64_t> positions_to_values(const std::vector<double>& x) {
    std::vector<int64_t> v;
    for (size_t d = 0; d < x.size(); ++d) v.push_back(o_.space[d].value(x[d]));
    return v;
  }

  // A neighbour: about three knobs (at least one) moved by up to ±step of their range, small moves
  // likelier than large ones (the difference of two uniform draws: triangular). Tries again
  // when the move rounds onto a candidate already run.
  std::vector<int64_t> perturb(const Candidate& parent, double step) {
    const size_t dims = o_.space.size();
    const double p = std::min(1.0, 3.0 / static_cast<double>(dims));
    std::vector<int64_t> v;
    for (int attempt = 0; attempt < 16; ++attempt) {
      v = parent.values;
      const size_t forced = rng_.below(static_cast<uint32_t>(dims));
      for (size_t d = 0; d < dims; ++d) {
        if (d != forced && rng_.uniform() >= p) continue;
        const double u = o_.space[d].position(parent.values[d]) + step * (rng_.uniform() - rng_.uniform());
        v[d] = o_.space[d].value(u);
      }
      if (!seen_.count(v)) break;
    }
    return v;
  }

  void evaluate(std::vector<Candidate*>& cands, bool validation = false) {
    const auto& seeds = validation ? o_.validation_seeds : o_.sim_seeds;
    std::vector<RunRequest> batch;
    for (const Candidate* c : cands)
      for (uint64_t s : seeds) batch.push_back(RunRequest{fmt::format("c{}-s{}", c->id, s), run_sets(c->params, s)});
    if (batch.empty()) return;
    std::vector<RunOutcome> out = eval_.run(batch);
    if (out.size() != batch.size()) throw std::runtime_error("tune: the evaluator lost runs");
    result_.runs += batch.size();
    size_t k = 0;
    for (Candidate* c : cands) {
      auto& runs = validation ? c->validation_runs : c->runs;
      for (size_t i = 0; i < seeds.size(); ++i) runs.push_back(std::move(out[k++]));
      if (validation) {
        c->validation_metrics = aggregate(runs);
        c->validation_objective = mean_objective(runs);
      } else {
        c->metrics = aggregate(runs);
        c->objective = mean_objective(runs);
      }
    }
  }

  double mean_objective(const std::vector<RunOutcome>& runs) const {
    double sum = 0;
    for (const RunOutcome& r : runs) sum += r.ok ? objective_of(r.metrics, o_.objective) : kInf;
    return runs.empty() ? kInf : sum / static_cast<double>(runs.size());
  }

  // Checks the constraints of `m` against the baseline's `base` into (feasible, violation, broken).
  void check(const Metrics& m, const Metrics& base, double objective, bool ok, bool* feasible, double* violation,
             std::vector<std::string>* broken) const {
    *violation = 0;
    broken->clear();
    const auto breach = [&](double excess, std::string text) {
      *violation += excess;
      broken->push_back(std::move(text));
    };
    if (!ok || !std::isfinite(objective)) breach(kInf, ok ? fmt::format("no {} (unfinished?)", o_.objective) : "failed runs");
    if (const double u = metric(m, "flows_unfinished", 0); u > 0) breach(1 + u, fmt::format("{} flows unfinished", u));
    const Constraints& c = o_.constraints;
    double min_util = c.min_utilization.value_or(0);
    if (c.utilization_vs_baseline) min_util = std::max(min_util, metric(base, "utilization", 0) - c.utilization_tolerance);
    if (const double u = metric(m, "utilization", 0); u < min_util)
      breach((min_util - u) / min_util, fmt::format("utilization {:.6g} < {:.6g}", u, min_util));
    if (const double d = metric(m, "drops", 0); d > c.max_drops)
      breach((d - c.max_drops) / std::max(1.0, c.max_drops), fmt::format("drops {} > {}", d, c.max_drops));
    if (c.max_queue_bytes) {
      if (const double q = metric(m, "queue_p99", 0); q > *c.max_queue_bytes)
        breach((q - *c.max_queue_bytes) / *c.max_queue_bytes, fmt::format("queue_p99 {} > {}", q, *c.max_queue_bytes));
    }
    *feasible = broken->empty();
  }

  void judge(Candidate& c) const {
    const bool ok = std::all_of(c.runs.begin(), c.runs.end(), [](const RunOutcome& r) { return r.ok; });
    check(c.metrics, result_.baseline.metrics, c.objective, ok, &c.feasible, &c.violation, &c.broken);
  }

  void run_round(std::vector<Candidate>& round, int r) {
    std::vector<Candidate*> ptrs;
    for (Candidate& c : round) ptrs.push_back(&c);
    evaluate(ptrs);
    for (Candidate& c : round) {
      judge(c);
      all_.push_back(std::move(c));
    }
    if (r == 0) {
      const auto feasible = std::count_if(all_.begin(), all_.end(), [](const Candidate& c) { return c.feasible; });
      say(fmt::format("start: {} candidates (Latin hypercube), {} feasible, best {} = {:.4g}", round.size(), feasible,
                      o_.objective, best_objective()));
    }
  }

  // The best `n` candidates: feasible ones by objective, then the rest by how far they miss.
  std::vector<const Candidate*> ranked(size_t n) const {
    std::vector<const Candidate*> r;
    for (const Candidate& c : all_) r.push_back(&c);
    std::sort(r.begin(), r.end(), [](const Candidate* a, const Candidate* b) {
      if (a->feasible != b->feasible) return a->feasible;
      const double ka = a->feasible ? a->objective : a->violation;
      const double kb = b->feasible ? b->objective : b->violation;
      return ka != kb ? ka < kb : a->id < b->id;
    });
    if (r.size() > n) r.resize(n);
    return r;
  }

  double best_objective() const {
    const auto r = ranked(1);
    return r.empty() || !r[0]->feasible ? kInf : r[0]->objective;
  }

  double overall(const Candidate& c) const {
    const double n = static_cast<double>(o_.sim_seeds.size()), v = static_cast<double>(o_.validation_seeds.size());
    return (c.objective * n + (v > 0 ? c.validation_objective * v : 0)) / (n + v);
  }

  // The finalists and the baseline on the held-out seeds; the winner is the finalist with the best
  // objective over every seed that stays feasible on them, if it beats the baseline there.
  void validate() {
    std::vector<Candidate> finalists;
    for (const Candidate* c : ranked(o_.finalists))
      if (c->feasible && c->objective < result_.baseline.objective) finalists.push_back(*c);
    if (!o_.validation_seeds.empty() && !finalists.empty()) {
      std::vector<Candidate*> ptrs{&result_.baseline};
      for (Candidate& c : finalists) ptrs.push_back(&c);
      evaluate(ptrs, true);
      result_.baseline.validation_feasible = true;
      for (Candidate& c : finalists) {
        double violation = 0;
        std::vector<std::string> broken;
        const bool ok = std::all_of(c.validation_runs.begin(), c.validation_runs.end(), [](const RunOutcome& r) { return r.ok; });
        check(c.validation_metrics, result_.baseline.validation_metrics, c.validation_objective, ok,
              &c.validation_feasible, &violation, &broken);
        say(fmt::format("validation: candidate {} {} = {:.4g} on seeds {} (baseline {:.4g}){}", c.id, o_.objective,
                        c.validation_objective, fmt::join(o_.validation_seeds, ","), result_.baseline.validation_objective,
                        broken.empty() ? "" : fmt::format(", breaks {}", fmt::join(broken, ", "))));
      }
      for (Candidate& c : finalists)
        for (Candidate& a : all_)
          if (a.id == c.id) a = c;
    }
    result_.best = result_.baseline;
    for (const Candidate& c : finalists) {
      const bool valid = o_.validation_seeds.empty() || c.validation_feasible;
      if (valid && overall(c) < overall(result_.best)) result_.best = c;
    }
    result_.candidates.push_back(result_.baseline);
    for (Candidate& c : all_) result_.candidates.push_back(std::move(c));
  }

  const SearchOptions& o_;
  Evaluator& eval_;
  const std::function<void(const std::string&)>& log_;
  Rng rng_;
  uint32_t next_id_ = 0;
  std::set<std::vector<int64_t>> seen_;
  std::vector<Candidate> all_;
  TuneResult result_;
};

}  // namespace

std::vector<std::string> Constraints::text() const {
  std::vector<std::string> out{"flows_unfinished = 0"};
  if (utilization_vs_baseline)
    out.push_back(utilization_tolerance > 0 ? fmt::format("utilization >= baseline - {}", utilization_tolerance)
                                            : "utilization >= baseline");
  if (min_utilization) out.push_back(fmt::format("utilization >= {}", *min_utilization));
  out.push_back(fmt::format("drops <= {}", max_drops));
  if (max_queue_bytes) out.push_back(fmt::format("queue_p99 <= {}", *max_queue_bytes));
  return out;
}

Metrics aggregate(const std::vector<RunOutcome>& runs) {
  Metrics out;
  if (runs.empty() || !std::all_of(runs.begin(), runs.end(), [](const RunOutcome& r) { return r.ok; })) return out;
  for (const auto& entry : runs.front().metrics) {
    const std::string& name = entry.first;
    double acc = 0;
    bool everywhere = true;
    for (const RunOutcome& r : runs) {
      const auto it = r.metrics.find(name);
      if (it == r.metrics.end()) {
        everywhere = false;
        break;
      }
      acc = is_worst_case(name) ? std::max(acc, it->second) : acc + it->second;
    }
    if (!everywhere) continue;
    const bool mean = !is_worst_case(name) && name != "flows_unfinished";
    out[name] = mean ? acc / static_cast<double>(runs.size()) : acc;
  }
  return out;
}

std::string knob_set(const cc::Mlx5Knob& k, int64_t value) { return fmt::format("cc.knobs.{}={}", k.name, value); }

std::vector<std::string> run_sets(const cc::DcqcnParams& params, uint64_t sim_seed) {
  std::vector<std::string> out{"cc.enabled=true"};
  for (const cc::ProfileKnob& k : cc::dynamics_knobs(params)) out.push_back(knob_set(*k.knob, k.value));
  out.push_back(fmt::format("sim.seed={}", sim_seed));
  return out;
}

TuneResult search(const SearchOptions& options, Evaluator& evaluator, const std::function<void(const std::string&)>& log) {
  TuneResult r = Search(options, evaluator, log).run();
  r.options = options;
  return r;
}

cc::DcqcnProfile TuneResult::profile(std::string_view name) const {
  cc::DcqcnProfile p;
  p.name = std::string(name);
  p.base = "mlx5";
  p.knobs = cc::dynamics_knobs(best.params);
  return p;
}

}  // namespace rdmad::sim::tune
