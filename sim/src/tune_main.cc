// `rdmad-sim tune`: the DCQCN tuning advisor's command line (docs/tuning.md).
#include "tune_main.h"

#include <unistd.h>

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <thread>

#include "rdmad/sim/output.h"
#include "rdmad/sim/scenario.h"
#include "rdmad/sim/tune.h"
#include "rdmad/sim/tune_runner.h"

namespace rdmad::sim {
namespace {

constexpr const char* kFooter = R"(
The search (docs/tuning.md): a Latin hypercube of --initial candidates over the knobs' ranges, drawn
from --seed; --rounds rounds of --per-round neighbours of the --parents best feasible candidates, the
step halving after a round without gain; then the --finalists best and the mlx5 defaults run again on
the held-out --validation-seeds, and the finalist with the best objective over every seed wins if it
stays feasible there and beats the defaults. Every run sets all DCQCN knobs (cc.knobs.*) and sim.seed.

Objectives (lower is better): p99 p95 p50 mean (FCT slowdown over every finished flow),
  p99:<10KB p99:10KB-100KB p99:100KB-1MB p99:1MB-10MB p99:>=10MB (also p50:, p95:),
  max_bucket_p99, collective (the slowest collective's completion_us), collective:NAME.
Constraints: every flow finishes; --min-utilization (bottleneck_utilization; "baseline": at least the
  mlx5 defaults' on the same seeds, less --utilization-tolerance); --max-drops; --max-queue-bytes (p99).
Knobs (--knob, repeatable; replaces the default space): NAME, NAME=LO..HI or NAME=LO..HI:lin|log|gain.
  Default: )";

constexpr const char* kFooterEnd = R"(

Outputs in --out DIR: profile.toml (or --profile FILE), candidates.csv (every candidate: knobs,
objective, constraint figures), runs/c<ID>-s<SEED>/ (each run's outputs; c0 is the mlx5 defaults),
slurm/ (the array scripts and task logs, with --slurm); with --plot the simulator's plots of the
defaults' and the winner's first run.

Examples:
  rdmad-sim tune leafspine_websearch --out /tmp/ws --set traffic.load=0.5
  rdmad-sim tune rail_allreduce --out /tmp/ar --objective collective --workers 2
  rdmad-sim tune incast --out /tmp/t --slurm --slurm-arg=--partition=sim --slurm-max-running 64
)";

std::vector<uint64_t> parse_seeds(const std::string& text, const char* option) {
  std::vector<uint64_t> out;
  if (text == "none") return out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    size_t used = 0;
    uint64_t v = 0;
    try {
      v = std::stoull(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size()) throw std::invalid_argument(fmt::format("{} {}: expected N,N,... or none", option, text));
    out.push_back(v);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

template <class Range, class F>
std::string toml_array(const Range& items, F f) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + f(i);
  return out.empty() ? "[]" : "[ " + out + " ]";
}

std::string num(double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : std::string("nan"); }

double metric(const tune::Metrics& m, const std::string& k) {
  const auto it = m.find(k);
  return it == m.end() ? std::nan("") : it->second;
}

// [tuning]: what the profile came from and what it did there.
std::vector<std::pair<std::string, std::string>> provenance(const tune::TuneResult& r, const std::string& scenario,
                                                            const std::vector<std::string>& sets,
                                                            const std::string& command) {
  const auto& o = r.options;
  const auto pair = [&](const std::string& k, bool validation) {
    const auto& b = validation ? r.baseline.validation_metrics : r.baseline.metrics;
    const auto& t = validation ? r.best.validation_metrics : r.best.metrics;
    return fmt::format("{{ mlx5 = {}, tuned = {} }}", num(metric(b, k)), num(metric(t, k)));
  };
  std::vector<std::pair<std::string, std::string>> t;
  t.emplace_back("command", quote(command));
  t.emplace_back("scenario", quote(scenario));
  t.emplace_back("set", toml_array(sets, quote));
  t.emplace_back("seed", fmt::format("{}", o.seed));
  t.emplace_back("sim_seeds", toml_array(o.sim_seeds, [](uint64_t s) { return fmt::format("{}", s); }));
  t.emplace_back("validation_seeds", toml_array(o.validation_seeds, [](uint64_t s) { return fmt::format("{}", s); }));
  t.emplace_back("objective", quote(o.objective));
  t.emplace_back("mlx5", num(r.baseline.objective));
  t.emplace_back("tuned", num(r.best.objective));
  t.emplace_back("change_pct", num(100 * (r.best.objective / r.baseline.objective - 1)));
  if (!o.validation_seeds.empty() && r.best.id != r.baseline.id) {
    t.emplace_back("validation_mlx5", num(r.baseline.validation_objective));
    t.emplace_back("validation_tuned", num(r.best.validation_objective));
  }
  for (const char* k : {"utilization", "drops", "pfc_pauses", "queue_p99"}) t.emplace_back(k, pair(k, false));
  t.emplace_back("constraints", toml_array(o.constraints.text(), quote));
  t.emplace_back("searched", toml_array(o.space, [](const tune::KnobRange& k) { return quote(k.text()); }));
  t.emplace_back("candidates", fmt::format("{}", r.candidates.size()));
  t.emplace_back("runs", fmt::format("{}", r.runs));
  t.emplace_back("winner", fmt::format("{}", r.best.id));
  return t;
}

void write_candidates(const tune::TuneResult& r, const std::filesystem::path& file) {
  std::ofstream f(file, std::ios::trunc);
  f << "id,round";
  for (const auto& k : r.options.space) f << "," << k.knob->name;
  f << ",objective,utilization,drops,pfc_pauses,queue_p99,flows_unfinished,feasible,validation_objective,broken\n";
  for (const tune::Candidate& c : r.candidates) {
    f << c.id << "," << c.round;
    for (int64_t v : c.values) f << "," << v;
    f << fmt::format(",{},{},{},{},{},{},{},{},\"{}\"\n", num(c.objective), num(metric(c.metrics, "utilization")),
                     num(metric(c.metrics, "drops")), num(metric(c.metrics, "pfc_pauses")),
                     num(metric(c.metrics, "queue_p99")), num(metric(c.metrics, "flows_unfinished")), c.feasible ? 1 : 0,
                     c.validation_runs.empty() ? std::string() : num(c.validation_objective),
                     fmt::join(c.broken, "; "));
  }
  if (!f) throw std::runtime_error(fmt::format("cannot write '{}'", file.string()));
}

// The command line without what does not change the result (where runs go and how they run), so
// that [tuning] says how to get the same profile again, and the same search run locally or on
// Slurm writes the same file.
std::string result_command(int argc, char** argv) {
  static const std::set<std::string> with_value = {"--out", "-o", "--workers", "--slurm-arg", "--slurm-max-running",
                                                   "--slurm-timeout-s", "--profile"};
  static const std::set<std::string> flags = {"--slurm", "--plot", "-q", "--quiet"};
  std::string command = "rdmad-sim tune";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const std::string name = a.substr(0, a.find('='));
    if (flags.count(a)) continue;
    if (with_value.count(name)) {
      if (name == a) ++i;  // its value is the next argument
      continue;
    }
    const bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                         "0123456789-_=.,/:") == std::string::npos;
    command += " " + (plain ? a : "'" + a + "'");
  }
  return command;
}

}  // namespace

int tune_main(int argc, char** argv, const std::function<std::filesystem::path(const std::string&)>& resolve) {
  CLI::App app{"rdmad-sim tune: search the DCQCN knobs for a scenario and write a profile"};
  std::string space_text;
  for (const auto& k : tune::default_space()) space_text += (space_text.empty() ? "" : " ") + k.text();
  app.footer(std::string(kFooter) + space_text + kFooterEnd);
  std::string scenario_arg, out_dir, profile_path, name, sim_seeds_text, validation_text;
  std::vector<std::string> sets, knobs, slurm_args;
  tune::SearchOptions o;
  std::string min_util = "baseline";
  double max_queue = 0;
  unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  bool slurm = false, plot = false, quiet = false;
  tune::SlurmOptions so;
  app.add_option("SCENARIO", scenario_arg, "scenario TOML file (or a shipped scenario's name)")->required();
  app.add_option("--out,-o", out_dir, "directory for the runs, candidates.csv and the profile")->required();
  app.add_option("--set", sets, "scenario override for every run, e.g. --set traffic.load=0.5 (repeatable)");
  app.add_option("--objective", o.objective, "what to minimise (below; default p99)");
  app.add_option("--knob", knobs, "a knob to search, NAME[=LO..HI[:lin|log|gain]] (repeatable; default below)");
  app.add_option("--seed", o.seed, "the search's seed (default 1)");
  app.add_option("--sim-seeds", sim_seeds_text, "sim.seed of every candidate's runs, N,N,... (default: the scenario's)");
  app.add_option("--validation-seeds", validation_text,
                 "held-out sim.seed values for the finalists and the defaults, N,N,... or none (default: the two "
                 "after the largest --sim-seeds)");
  app.add_option("--initial", o.initial, "Latin hypercube size (default 24)")->check(CLI::Range(1, 100000));
  app.add_option("--rounds", o.rounds, "refinement rounds (default 4)");
  app.add_option("--per-round", o.per_round, "candidates per refinement round (default 8)");
  app.add_option("--parents", o.parents, "best candidates a round perturbs (default 2)")->check(CLI::Range(1, 1000));
  app.add_option("--step", o.step, "first refinement step, as a share of each knob's range (default 0.25)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--finalists", o.finalists, "candidates validated on the held-out seeds (default 3)");
  app.add_option("--min-utilization", min_util, "a number, or baseline (default)");
  app.add_option("--utilization-tolerance", o.constraints.utilization_tolerance, "below the baseline allowed (default 0)");
  app.add_option("--max-drops", o.constraints.max_drops, "most drops allowed per run (default 0)");
  app.add_option("--max-queue-bytes", max_queue, "largest p99 bottleneck queue allowed (default: any)");
  app.add_option("--workers", workers, "local worker processes (default: the CPUs)")->check(CLI::Range(1, 4096));
  app.add_flag("--slurm", slurm, "run each batch as a Slurm job array (sbatch) instead of local workers");
  app.add_option("--slurm-arg", slurm_args, "argument for sbatch, e.g. --slurm-arg=--partition=sim (repeatable)");
  app.add_option("--slurm-max-running", so.max_running, "tasks of an array at a time (--array=...%N)");
  app.add_option("--slurm-timeout-s", so.timeout_seconds, "give up on an array after this long (default 86400)");
  app.add_option("--profile", profile_path, "where to write the profile (default OUT/profile.toml)");
  app.add_option("--name", name, "the profile's name (default: the scenario's)");
  app.add_flag("--plot", plot, "draw the simulator's plots of the defaults' and the winner's runs");
  app.add_flag("--quiet,-q", quiet, "no progress lines");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is no error; a usage error exits 2, as a bad scenario does
  }
  try {
    const std::filesystem::path scenario = std::filesystem::absolute(resolve(scenario_arg));
    const Scenario s = load_scenario(scenario, sets);  // errors name the file, line and key now, not in every run
    o.sim_seeds = sim_seeds_text.empty() ? std::vector<uint64_t>{s.seed} : parse_seeds(sim_seeds_text, "--sim-seeds");
    if (validation_text.empty()) {
      const uint64_t top = *std::max_element(o.sim_seeds.begin(), o.sim_seeds.end());
      o.validation_seeds = {top + 1, top + 2};
    } else {
      o.validation_seeds = parse_seeds(validation_text, "--validation-seeds");
    }
    if (!knobs.empty()) {
      o.space.clear();
      for (const auto& k : knobs) o.space.push_back(tune::parse_knob_range(k));
    }
    if (min_util == "baseline") {
      o.constraints.utilization_vs_baseline = true;
    } else {
      o.constraints.utilization_vs_baseline = false;
      o.constraints.min_utilization = std::stod(min_util);
    }
    if (max_queue > 0) o.constraints.max_queue_bytes = max_queue;
    o.baseline = cc::mlx5_profile();

    tune::RunnerOptions ro;
    char self[4096];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) throw std::runtime_error("cannot find this program (/proc/self/exe)");
    ro.sim_binary = std::string(self, static_cast<size_t>(n));
    ro.scenario = scenario;
    ro.sets = sets;
    ro.work_dir = std::filesystem::absolute(out_dir);
    std::filesystem::create_directories(ro.work_dir);
    std::unique_ptr<tune::Evaluator> eval;
    if (slurm) {
      so.sbatch_args = slurm_args;
      eval = std::make_unique<tune::SlurmArray>(ro, so);
    } else {
      eval = std::make_unique<tune::ProcessPool>(ro, workers);
    }
    const auto log = [&](const std::string& line) {
      if (!quiet) std::fprintf(stderr, "rdmad-sim tune: %s\n", line.c_str());
    };
    const tune::TuneResult r = tune::search(o, *eval, log);

    if (name.empty()) name = s.name + "-tuned";
    cc::DcqcnProfile profile = r.profile(name);
    profile.tuning = provenance(r, scenario_arg, sets, result_command(argc, argv));
    if (profile_path.empty()) profile_path = (ro.work_dir / "profile.toml").string();
    {
      std::ofstream f(profile_path, std::ios::trunc);
      f << cc::render_dcqcn_profile(
          profile, fmt::format("DCQCN profile written by rdmad-sim tune (docs/tuning.md).\nLoad it with [cc] "
                               "profile_file = \"...\", or push it live with rdmactl cc set --profile FILE."));
      if (!f) throw std::runtime_error(fmt::format("cannot write '{}'", profile_path));
    }
    write_candidates(r, ro.work_dir / "candidates.csv");
    if (plot) {
      for (const tune::Candidate* c : {&r.baseline, &r.best}) {
        const auto dir = ro.work_dir / "runs" / fmt::format("c{}-s{}", c->id, o.sim_seeds.front());
        if (const auto st = plot_outputs(dir); !st.ok())
          std::fprintf(stderr, "rdmad-sim tune: plots of %s not drawn: %s\n", dir.c_str(), st.message().c_str());
      }
    }
    const bool better = r.best.id != r.baseline.id;
    std::printf("%s: %s %s -> %s (%+.1f%%) on seeds %s", s.name.c_str(), o.objective.c_str(),
                num(r.baseline.objective).c_str(), num(r.best.objective).c_str(),
                100 * (r.best.objective / r.baseline.objective - 1), fmt::format("{}", fmt::join(o.sim_seeds, ",")).c_str());
    if (better && !o.validation_seeds.empty())
      std::printf("; held-out seeds %s: %s -> %s (%+.1f%%)", fmt::format("{}", fmt::join(o.validation_seeds, ",")).c_str(),
                  num(r.baseline.validation_objective).c_str(), num(r.best.validation_objective).c_str(),
                  100 * (r.best.validation_objective / r.baseline.validation_objective - 1));
    std::printf("\n%sprofile: %s (candidate %u of %zu, %llu runs)\n",
                better ? "" : "no candidate beat the mlx5 defaults within the constraints; the profile is the defaults\n",
                profile_path.c_str(), r.best.id, r.candidates.size(), static_cast<unsigned long long>(r.runs));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdmad-sim tune: %s\n", e.what());
    return 2;
  }
  return 0;
}

}  // namespace rdmad::sim
