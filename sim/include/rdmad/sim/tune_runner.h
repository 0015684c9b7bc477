#pragma once
// Where the advisor's candidates run: each run is `rdmad-sim SCENARIO --out WORK/runs/ID -q --set ...`
// and its results are read back from that directory. ProcessPool runs them as local worker
// processes; SlurmArray submits each batch as one Slurm job array (sbatch --array) whose task i runs
// run i, and collects the directories when the array is done.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "rdmad/sim/tune.h"

namespace rdmad::sim::tune {

struct RunnerOptions {
  std::filesystem::path sim_binary;  // rdmad-sim, absolute (Slurm nodes run it by this path)
  std::filesystem::path scenario;    // absolute
  std::vector<std::string> sets;     // the caller's --set, before each run's own
  std::filesystem::path work_dir;    // runs go to work_dir/runs/<id>/
};

// The figures of a finished run (tune.h, Metrics) from its summary.json and fct.csv; throws
// std::runtime_error naming the file when they are missing or malformed.
Metrics read_run_metrics(const std::filesystem::path& run_dir);
// The run's directory and its command line.
std::filesystem::path run_dir(const RunnerOptions& o, const RunRequest& r);
std::vector<std::string> run_command(const RunnerOptions& o, const RunRequest& r);
// What a finished run left: its metrics, or why there are none (exit status, the log's tail).
RunOutcome collect(const RunnerOptions& o, const RunRequest& r, int exit_status);

class ProcessPool final : public Evaluator {
 public:
  ProcessPool(RunnerOptions options, unsigned workers);
  std::vector<RunOutcome> run(const std::vector<RunRequest>& batch) override;

 private:
  RunnerOptions o_;
  unsigned workers_;
};

struct SlurmOptions {
  std::string sbatch = "sbatch";
  std::string squeue = "squeue";
  std::string scancel = "scancel";
  std::vector<std::string> sbatch_args;  // passed to sbatch before the script (--partition=..., --time=...)
  uint32_t max_running = 0;              // tasks of one array at a time (--array=0-N%max); 0 = Slurm's choice
  double poll_seconds = 0.5;
  double timeout_seconds = 86400;        // per array; then it is cancelled and its missing runs fail
};

class SlurmArray final : public Evaluator {
 public:
  SlurmArray(RunnerOptions options, SlurmOptions slurm);
  std::vector<RunOutcome> run(const std::vector<RunRequest>& batch) override;
  // Job ids submitted so far.
  const std::vector<std::string>& jobs() const { return jobs_; }

 private:
  RunnerOptions o_;
  SlurmOptions s_;
  std::vector<std::string> jobs_;
};

}  // namespace rdmad::sim::tune
