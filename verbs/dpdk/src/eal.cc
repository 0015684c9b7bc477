#include "eal.h"

#include <pthread.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <sstream>

#include "rdmad/base/log.h"
#include "rdmad/base/log_fields.h"

namespace rdmad::verbs::dpdk {
namespace {

struct EalState {
  std::mutex mu;
  bool tried = false;
  std::string args;   // what it was initialised with
  Status result = Status::success();
};

EalState& state() {
  static EalState s;
  return s;
}

// DPDK's log lines (one vfprintf and an fflush per message) to the verbs logger, at the level
// DPDK gave them. Its errors are mostly followed by an error of ours that names the option; memif
// reports "Failed to register mp action callback" on every port without shared config.
ssize_t log_write(void*, const char* buf, size_t size) {
  thread_local std::string line;
  line.append(buf, size);
  size_t nl;
  while ((nl = line.find('\n')) != std::string::npos) {
    const std::string text = line.substr(0, nl);
    line.erase(0, nl + 1);
    if (text.empty()) continue;
    auto log = log::get(log::Component::kVerbs);
    const int level = rte_log_cur_msg_loglevel();
    if (level <= static_cast<int>(RTE_LOG_CRIT)) {
      log->error("dpdk log message={}", base::q(text));
    } else if (level <= static_cast<int>(RTE_LOG_WARNING)) {
      log->warn("dpdk log message={}", base::q(text));
    } else if (level <= static_cast<int>(RTE_LOG_INFO)) {
      log->info("dpdk log message={}", base::q(text));
    } else {
      log->debug("dpdk log message={}", base::q(text));
    }
  }
  return static_cast<ssize_t>(size);
}

bool has_option(const std::vector<std::string>& args, std::initializer_list<const char*> names) {
  for (const std::string& a : args)
    for (const char* n : names)
      if (a == n || a.rfind(std::string(n) + "=", 0) == 0) return true;
  return false;
}

}  // namespace

std::vector<std::string> eal_argv(const std::string& eal_args, int pid, int allowed_cpu) {
  std::vector<std::string> argv = {"rdmad"};
  std::istringstream in(eal_args);
  for (std::string a; in >> a;) argv.push_back(a);
  if (!has_option(argv, {"--file-prefix"})) argv.push_back("--file-prefix=rdmad-" + std::to_string(pid));
  if (!has_option(argv, {"-l", "-c", "--lcores"})) {
    argv.push_back("-l");
    argv.push_back(std::to_string(allowed_cpu));
  }
  return argv;
}

Status ensure_eal(const std::string& eal_args) {
  EalState& s = state();
  std::lock_guard lock(s.mu);
  if (s.tried) {
    if (!s.result.ok()) return s.result;
    if (!eal_args.empty() && eal_args != s.args) {
      return Status::error("dpdk nic: option eal_args '" + eal_args + "' differs from '" + s.args +
                           "', which the process's EAL was initialised with (one EAL per process: give every dpdk "
                           "NIC the same eal_args, or leave it empty)");
    }
    return Status::success();
  }
  s.tried = true;
  s.args = eal_args.empty() ? kDefaultEalArgs : eal_args;
  cpu_set_t before;
  CPU_ZERO(&before);
  const bool saved = pthread_getaffinity_np(pthread_self(), sizeof before, &before) == 0;
  int first_cpu = 0;
  while (saved && first_cpu < CPU_SETSIZE - 1 && !CPU_ISSET(first_cpu, &before)) ++first_cpu;
  std::vector<std::string> args = eal_argv(s.args, getpid(), first_cpu);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  static cookie_io_functions_t fns = {nullptr, log_write, nullptr, nullptr};
  if (FILE* f = fopencookie(nullptr, "w", fns)) {
    setvbuf(f, nullptr, _IOLBF, 0);
    rte_openlog_stream(f);
  }
  const int rc = rte_eal_init(static_cast<int>(args.size()), argv.data());
  if (saved) pthread_setaffinity_np(pthread_self(), sizeof before, &before);
  if (rc < 0) {
    std::string joined;
    for (size_t i = 1; i < args.size(); ++i) joined += (i > 1 ? " " : "") + args[i];
    s.result = Status::error("dpdk nic: option eal_args: rte_eal_init(" + joined + ") failed: " +
                             rte_strerror(rte_errno) + " (the log lines before say why)");
  }
  return s.result;
}

}  // namespace rdmad::verbs::dpdk
