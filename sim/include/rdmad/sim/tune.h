#pragma once
// The DCQCN tuning advisor (`rdmad-sim tune`, docs/tuning.md): searches the mlx5 knob space for the
// profile that minimises an objective of a scenario's results under constraints. A Latin hypercube
// over the knobs' ranges (from the seed), then rounds of local refinement around the best feasible
// candidates with a shrinking step, then the finalists and the mlx5 defaults run again on held-out
// seeds. Runs go to an Evaluator: a local process pool or a Slurm job array (tune_runner.h).
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rdmad/cc/dcqcn_params.h"
#include "rdmad/cc/dcqcn_profile.h"

namespace rdmad::sim::tune {

// How a knob's range is walked: evenly, evenly in log, or evenly in log(1024 − value) (dce_tcp_g,
// whose gain g = (1024 − G)/1024 spans decades as G nears 1024).
enum class Scale : uint8_t { kLinear, kLog, kLogGain };

struct KnobRange {
  const cc::Mlx5Knob* knob = nullptr;
  int64_t lo = 0;  // inclusive, inside the knob's vendor range [knob->min, knob->max]
  int64_t hi = 0;
  Scale scale = Scale::kLinear;

  // The knob value at position u ∈ [0, 1] (rounded to the knob's integer units).
  int64_t value(double u) const;
  // The position of value v, clipped to [0, 1].
  double position(int64_t v) const;
  // "rpg_time_reset=1..2000:log".
  std::string text() const;
};

// The default search space (docs/tuning.md, "Knobs"): the RP and NP knobs that shape DCQCN's
// dynamics, each over a range that keeps it working at 25-400 Gb/s.
std::vector<KnobRange> default_space();
// The default range of one knob that may be searched; nullopt for a knob the advisor never searches.
std::optional<KnobRange> default_range(std::string_view knob);
// "NAME", "NAME=LO..HI" or "NAME=LO..HI:lin|log|gain"; throws std::invalid_argument saying why.
KnobRange parse_knob_range(std::string_view spec);

// Figures of one run (or their aggregate over seeds) by name: "p99", "p95", "p50", "mean" (FCT
// slowdown over the finished flows), "p99:<10KB" (a summary.json bucket), "max_bucket_p99",
// "collective" (the slowest collective's completion_us), "collective:NAME", "utilization"
// (bottleneck_utilization), "goodput", "drops", "pfc_pauses", "queue_p99", "queue_max" (bytes),
// "flows_unfinished".
using Metrics = std::map<std::string, double, std::less<>>;
// Every name an objective may be (without the bucket and collective names, which depend on the run).
std::vector<std::string> objective_names();

struct Constraints {
  std::optional<double> min_utilization;  // absolute
  bool utilization_vs_baseline = true;    // ≥ the mlx5 defaults' on the same seeds, less the tolerance
  double utilization_tolerance = 0;
  double max_drops = 0;
  std::optional<double> max_queue_bytes;  // queue_p99
  // "utilization >= baseline", "drops <= 0", ...
  std::vector<std::string> text() const;
};

struct RunRequest {
  std::string id;                 // "c12-s1": the run's directory name
  std::vector<std::string> sets;  // --set overrides: the candidate's knobs and the seed
};
struct RunOutcome {
  bool ok = false;
  std::string error;  // why the run gave no results (its exit status, the tail of its log)
  Metrics metrics;
};

// Runs candidates. Implementations run a batch in parallel and return outcomes in request order.
class Evaluator {
 public:
  virtual ~Evaluator() = default;
  virtual std::vector<RunOutcome> run(const std::vector<RunRequest>& batch) = 0;
};

struct SearchOptions {
  uint64_t seed = 1;  // the search's own random stream (Latin hypercube, refinement moves)
  std::vector<KnobRange> space = default_space();
  cc::DcqcnParams baseline = cc::mlx5_profile();  // compared against; knobs not searched keep its values
  std::string objective = "p99";
  Constraints constraints;
  std::vector<uint64_t> sim_seeds = {1};         // every candidate runs with each (sim.seed)
  std::vector<uint64_t> validation_seeds;        // finalists and the baseline run again with these
  uint32_t initial = 24;   // Latin hypercube size
  uint32_t rounds = 4;     // refinement rounds
  uint32_t per_round = 8;  // candidates per refinement round
  uint32_t parents = 2;    // best feasible candidates a round perturbs
  double step = 0.25;      // first refinement step, in units of a knob's range; halved after a round without gain
  uint32_t finalists = 3;  // best candidates validated on validation_seeds
};

struct Candidate {
  uint32_t id = 0;                // 0 is the baseline
  int round = 0;                  // -1 baseline, 0 the space-filling start, 1.. refinement, `rounds`+1 validation
  std::vector<int64_t> values;    // one per SearchOptions::space knob
  cc::DcqcnParams params;         // the baseline with `values` applied
  std::vector<RunOutcome> runs;   // one per sim seed
  Metrics metrics;                // aggregate over the runs (mean; max for drops, queues, pauses; sum unfinished)
  double objective = std::numeric_limits<double>::infinity();
  bool feasible = false;
  double violation = 0;             // how far outside the constraints (relative), 0 when feasible
  std::vector<std::string> broken;  // the constraints it breaks, as text
  // On the validation seeds (finalists and the baseline only).
  std::vector<RunOutcome> validation_runs;
  Metrics validation_metrics;
  double validation_objective = std::numeric_limits<double>::infinity();
  bool validation_feasible = false;
};

struct TuneResult {
  SearchOptions options;
  Candidate baseline;
  Candidate best;                      // == baseline when nothing beat it
  std::vector<Candidate> candidates;   // every candidate in id order, the baseline first
  uint64_t runs = 0;                   // simulator runs made
  // The chosen profile: every dynamics knob of best.params (cc::dynamics_knobs), base "mlx5".
  cc::DcqcnProfile profile(std::string_view name) const;
};

// The override that sets knob `k` to `value` in a run ("cc.knobs.rpg_time_reset=55").
std::string knob_set(const cc::Mlx5Knob& k, int64_t value);
// Every --set of one run: each dynamics knob of `params`, cc enabled, and the seed.
std::vector<std::string> run_sets(const cc::DcqcnParams& params, uint64_t sim_seed);

// Runs the search; `log` gets one line per round. Deterministic for a given seed and evaluator.
TuneResult search(const SearchOptions& options, Evaluator& evaluator,
                  const std::function<void(const std::string&)>& log = {});

// Aggregates per-seed metrics (tune_search.cc rules) and checks constraints; exposed for tests.
Metrics aggregate(const std::vector<RunOutcome>& runs);

}  // namespace rdmad::sim::tune
