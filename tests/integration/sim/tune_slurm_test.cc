// `rdmad-sim tune --slurm` against a real Slurm cluster on localhost: the test starts slurmctld and
// slurmd (Debian's slurm-wlm) with a private configuration (its own ports, state and spool
// directories, AuthType=auth/none, so no munged is needed), submits a sweep of four candidates of a
// tiny scenario through the advisor as job arrays, checks that Slurm ran every task and that the
// results equal the local process pool's, and stops both daemons.
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <regex>
#include <thread>

#include "rdmad/cc/dcqcn_profile.h"
#include "support/free_port.h"
#include "support/subprocess.h"
#include "tune_support.h"

namespace rdmad::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr const char* kSlurmctld = "/usr/sbin/slurmctld";
constexpr const char* kSlurmd = "/usr/sbin/slurmd";

std::string user_name() {
  const passwd* pw = ::getpwuid(::getuid());
  return pw != nullptr ? pw->pw_name : "root";
}

struct Ran {
  int exit = -1;
  std::string output;
};

class SlurmCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* tool : {kSlurmctld, kSlurmd, "/usr/bin/sbatch", "/usr/bin/squeue", "/usr/bin/sinfo"})
      if (::access(tool, X_OK) != 0)
        GTEST_SKIP() << tool << " is not installed (scripts/setup-deps installs slurm-wlm)";
    if (!fs::exists("/usr/lib/x86_64-linux-gnu/slurm-wlm/auth_none.so") &&
        !fs::exists("/usr/lib/slurm-wlm/auth_none.so"))
      GTEST_SKIP() << "this Slurm has no auth/none plugin (Slurm 23.11 and later removed it)";
    const std::string d = dir_.path();
    for (const char* sub : {"state", "spool", "log"}) fs::create_directories(d + "/" + sub);
    const int ctld_port = free_port(SOCK_STREAM);
    int slurmd_port = free_port(SOCK_STREAM);
    while (slurmd_port == ctld_port) slurmd_port = free_port(SOCK_STREAM);
    // One node, this host under a private name, as many CPUs as the machine has (jobs run one
    // task per CPU); everything the daemons write stays in the temporary directory.
    conf_ = dir_.write(
        "slurm.conf",
        "ClusterName=rdmadtune\nSlurmctldHost=localhost(127.0.0.1)\n"
        "AuthType=auth/none\nCredType=cred/none\n"
        "SlurmUser=" + user_name() + "\nSlurmdUser=" + user_name() + "\n"
        "SlurmctldPort=" + std::to_string(ctld_port) + "\nSlurmdPort=" + std::to_string(slurmd_port) + "\n"
        "StateSaveLocation=" + d + "/state\nSlurmdSpoolDir=" + d + "/spool\n"
        "SlurmctldPidFile=" + d + "/slurmctld.pid\nSlurmdPidFile=" + d + "/slurmd.pid\n"
        "SlurmctldLogFile=" + d + "/log/slurmctld.log\nSlurmdLogFile=" + d + "/log/slurmd.log\n"
        "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSwitchType=switch/none\nMpiDefault=none\n"
        "ReturnToService=2\nSchedulerType=sched/builtin\nSelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
        "JobCompType=jobcomp/none\nAccountingStorageType=accounting_storage/none\n"
        "JobAcctGatherType=jobacct_gather/none\nMinJobAge=10\n"
        "NodeName=tunenode NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=" +
            std::to_string(std::max(1u, std::thread::hardware_concurrency())) +
            " State=UNKNOWN\nPartitionName=tune Nodes=tunenode Default=YES MaxTime=INFINITE State=UP\n");
    env_ = {"SLURM_CONF=" + conf_};
    ctld_ = std::make_unique<Subprocess>(std::vector<std::string>{kSlurmctld, "-D", "-f", conf_}, env_);
    slurmd_ = std::make_unique<Subprocess>(std::vector<std::string>{kSlurmd, "-D", "-N", "tunenode", "-f", conf_}, env_);
    // Ready when the controller reports the node idle (polled, with a deadline).
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    std::string state;
    while (std::chrono::steady_clock::now() < deadline) {
      state = run({"/usr/bin/sinfo", "-h", "-n", "tunenode", "-o", "%T"}).output;
      if (state.rfind("idle", 0) == 0) break;
      if (ctld_->wait_exit(0ms) || slurmd_->wait_exit(0ms)) break;
      usleep(100'000);
    }
    ASSERT_EQ(state.rfind("idle", 0), 0u) << "node never idle: " << state << "\nslurmctld:\n"
                                         << ctld_->output() << "\nslurmd:\n"
                                         << slurmd_->output();
  }

  void TearDown() override {
    // Both daemons end on SIGTERM; whatever does not within the deadline is killed by ~Subprocess.
    for (auto* p : {slurmd_.get(), ctld_.get()}) {
      if (p == nullptr) continue;
      p->signal(SIGTERM);
      EXPECT_TRUE(p->wait_exit(30s).has_value()) << p->output();
    }
  }

  Ran run(std::vector<std::string> argv) {
    Subprocess p(std::move(argv), env_);
    Ran r;
    r.exit = p.wait_exit(120s).value_or(-1);
    r.output = p.output();
    return r;
  }

  TempDir dir_;
  std::string conf_;
  std::vector<std::string> env_;
  std::unique_ptr<Subprocess> ctld_, slurmd_;
};

TEST_F(SlurmCluster, TheAdvisorRunsASweepAsJobArrays) {
  const std::string scenario = tiny_scenario(dir_);
  const std::vector<std::string> sweep{binary("sim/rdmad-sim"), "tune", scenario, "--initial", "4", "--rounds", "0",
                                       "--validation-seeds", "none", "-q"};
  auto slurm = sweep;
  slurm.insert(slurm.end(), {"--out", dir_.path() + "/slurm-run", "--slurm", "--slurm-arg=--partition=tune"});
  const Ran s = run(slurm);
  ASSERT_EQ(s.exit, 0) << s.output << "\nslurmctld:\n" << ctld_->output();
  const std::string out = dir_.path() + "/slurm-run";
  // Two arrays: the mlx5 defaults, then the four candidates of the hypercube, one task each.
  ASSERT_TRUE(fs::exists(out + "/slurm/array-0.sh"));
  ASSERT_TRUE(fs::exists(out + "/slurm/array-1.sh"));
  EXPECT_FALSE(fs::exists(out + "/slurm/array-2.sh"));
  const std::string script = read_text(out + "/slurm/array-1.sh");
  EXPECT_NE(script.find("#SBATCH --job-name=rdmad-tune"), std::string::npos) << script;
  for (int task = 0; task < 4; ++task) {
    // Slurm wrote each task's log (the script's --output), and each run its exit status and results.
    EXPECT_TRUE(fs::exists(out + "/slurm/array-1-" + std::to_string(task) + ".out")) << task;
    const std::string run_dir = out + "/runs/c" + std::to_string(task + 1) + "-s1";
    EXPECT_EQ(read_text(run_dir + "/exit_status"), "0\n") << run_dir;
    EXPECT_TRUE(fs::exists(run_dir + "/summary.json")) << run_dir;
  }
  // The controller ran five array tasks (1 + 4), each to exit status 0.
  const std::string log = read_text(dir_.path() + "/log/slurmctld.log");
  const std::regex done(R"(_job_complete: JobId=\d+_\d+\(\d+\) WEXITSTATUS 0)");
  EXPECT_EQ(std::distance(std::sregex_iterator(log.begin(), log.end(), done), std::sregex_iterator()), 5) << log;
  const auto csv = lines_of(read_text(out + "/candidates.csv"));
  ASSERT_EQ(csv.size(), 1u + 1 + 4);
  const cc::ProfileParse p = cc::parse_dcqcn_profile(read_text(out + "/profile.toml"), "profile.toml");
  ASSERT_TRUE(p.ok()) << p.errors.front().to_string("profile.toml");
  EXPECT_EQ(p.profile.tuning_value("runs"), "5");

  // Where a candidate ran does not change what it scored.
  auto local = sweep;
  local.insert(local.end(), {"--out", dir_.path() + "/local-run", "--workers", "2"});
  const Ran l = run(local);
  ASSERT_EQ(l.exit, 0) << l.output;
  EXPECT_EQ(read_text(dir_.path() + "/local-run/candidates.csv"), read_text(out + "/candidates.csv"));
  EXPECT_EQ(read_text(dir_.path() + "/local-run/profile.toml"), read_text(out + "/profile.toml"));
}

TEST_F(SlurmCluster, ARefusedSubmissionStopsTheSearchWithSlurmsWords) {
  const std::string scenario = tiny_scenario(dir_);
  const Ran r = run({binary("sim/rdmad-sim"), "tune", scenario, "--initial", "2", "--rounds", "0",
                     "--validation-seeds", "none", "-q", "--out", dir_.path() + "/bad", "--slurm",
                     "--slurm-arg=--partition=nowhere"});
  EXPECT_EQ(r.exit, 2) << r.output;
  EXPECT_NE(r.output.find("sbatch failed (status 1): sbatch: error: invalid partition specified: nowhere"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace rdmad::test
