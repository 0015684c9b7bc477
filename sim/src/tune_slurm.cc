// The advisor's runs on a Slurm cluster: one job array per batch. Task i runs run i and leaves its
// exit status in the run's directory (written to a temporary name and renamed, so a status that is
// there is whole); the advisor waits until every run has one, or until Slurm no longer lists the
// array (a task that died without a status failed), or until the timeout (the array is cancelled).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "rdmad/sim/tune_runner.h"
#include "tune_process.h"

namespace rdmad::sim::tune {
namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string shell_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) out += (out.empty() ? "" : " ") + shell_quote(a);
  return out;
}

std::optional<int> read_status(const std::filesystem::path& file) {
  std::ifstream in(file);
  int status = 0;
  if (in >> status) return status;
  return std::nullopt;
}

}  // namespace

SlurmArray::SlurmArray(RunnerOptions options, SlurmOptions slurm) : o_(std::move(options)), s_(std::move(slurm)) {}

std::vector<RunOutcome> SlurmArray::run(const std::vector<RunRequest>& batch) {
  std::vector<RunOutcome> out(batch.size());
  if (batch.empty()) return out;
  const auto slurm_dir = o_.work_dir / "slurm";
  std::filesystem::create_directories(slurm_dir);
  const auto script = slurm_dir / fmt::format("array-{}.sh", jobs_.size());
  std::string text = fmt::format(
      "#!/bin/bash\n# rdmad-sim tune: {} runs, task i runs run i (docs/tuning.md, \"On a Slurm cluster\").\n"
      "#SBATCH --job-name=rdmad-tune\n#SBATCH --output={}\ncase \"$SLURM_ARRAY_TASK_ID\" in\n",
      batch.size(), (slurm_dir / fmt::format("array-{}-%a.out", jobs_.size())).string());
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto dir = run_dir(o_, batch[i]);
    std::filesystem::create_directories(dir);
    std::filesystem::remove(dir / "exit_status");
    const std::string status = shell_quote((dir / "exit_status").string());
    text += fmt::format("  {})\n    {} > {} 2>&1\n    echo $? > {}.tmp && mv {}.tmp {}\n    ;;\n", i,
                        shell_line(run_command(o_, batch[i])), shell_quote((dir / "log.txt").string()), status,
                        status, status, status);
  }
  text += "  *) echo \"no run for task $SLURM_ARRAY_TASK_ID\" >&2; exit 2 ;;\nesac\n";
  {
    std::ofstream f(script, std::ios::trunc);
    f << text;
    if (!f) throw std::runtime_error(fmt::format("cannot write '{}'", script.string()));
  }
  std::filesystem::permissions(script, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                           std::filesystem::perms::others_read);

  std::vector<std::string> submit{s_.sbatch, "--parsable"};
  submit.push_back(fmt::format("--array=0-{}{}", batch.size() - 1,
                               s_.max_running > 0 ? fmt::format("%{}", s_.max_running) : std::string()));
  submit.insert(submit.end(), s_.sbatch_args.begin(), s_.sbatch_args.end());
  submit.push_back(script.string());
  const Captured sub = capture(submit);
  std::string job = sub.output.substr(0, sub.output.find_first_of(";\n"));
  if (sub.status != 0 || job.empty() || job.find_first_not_of("0123456789") != std::string::npos)
    throw std::runtime_error(fmt::format("sbatch failed (status {}): {}", sub.status, sub.output));
  jobs_.push_back(job);

  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(s_.timeout_seconds);
  const auto statuses = [&] {
    size_t n = 0;
    for (const RunRequest& r : batch) n += std::filesystem::exists(run_dir(o_, r) / "exit_status") ? 1 : 0;
    return n;
  };
  std::string why_missing;
  // Slurm may stop listing the array a moment before the last status is visible (a shared file
  // system): after it is gone, look a few more polls.
  int polls_after_gone = -1;
  while (statuses() < batch.size()) {
    if (Clock::now() > deadline) {
      capture({s_.scancel, job});
      why_missing = fmt::format("Slurm job {} timed out after {} s and was cancelled", job, s_.timeout_seconds);
      break;
    }
    if (polls_after_gone < 0) {
      const Captured q = capture({s_.squeue, "-h", "-j", job, "-o", "%i"});
      if (q.status != 0 || q.output.find_first_not_of(" \n") == std::string::npos) polls_after_gone = 0;
    } else if (++polls_after_gone > 4) {
      why_missing = fmt::format("Slurm job {} ended without the run's exit status", job);
      break;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(s_.poll_seconds));
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto dir = run_dir(o_, batch[i]);
    if (const auto status = read_status(dir / "exit_status")) {
      out[i] = collect(o_, batch[i], *status);
    } else {
      out[i].error = fmt::format("run {}: {} (task {}: {})", batch[i].id, why_missing, i,
                                 (slurm_dir / fmt::format("array-{}-{}.out", jobs_.size() - 1, i)).string());
    }
  }
  return out;
}

}  // namespace rdmad::sim::tune
