// The advisor's runs as processes: a local pool of rdmad-sim workers, and the run's own files.
#include "rdmad/sim/tune_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "tune_process.h"

extern char** environ;

namespace rdmad::sim::tune {
namespace {

std::string log_tail(const std::filesystem::path& file, size_t bytes = 600) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return "(no log)";
  std::ostringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text.size() > bytes ? "..." + text.substr(text.size() - bytes) : text;
}

}  // namespace

std::filesystem::path run_dir(const RunnerOptions& o, const RunRequest& r) { return o.work_dir / "runs" / r.id; }

std::vector<std::string> run_command(const RunnerOptions& o, const RunRequest& r) {
  std::vector<std::string> argv{o.sim_binary.string(), o.scenario.string(), "--out", run_dir(o, r).string(), "-q"};
  for (const auto* sets : {&o.sets, &r.sets}) {
    for (const std::string& s : *sets) {
      argv.push_back("--set");
      argv.push_back(s);
    }
  }
  return argv;
}

RunOutcome collect(const RunnerOptions& o, const RunRequest& r, int exit_status) {
  RunOutcome out;
  const auto dir = run_dir(o, r);
  if (exit_status != 0) {
    out.error = fmt::format("run {} exited with status {}: {}", r.id, exit_status, log_tail(dir / "log.txt"));
    return out;
  }
  try {
    out.metrics = read_run_metrics(dir);
    out.ok = true;
  } catch (const std::exception& e) {
    out.error = fmt::format("run {}: {}", r.id, e.what());
  }
  return out;
}

namespace {

// Starts argv with stdin from /dev/null and stdout and stderr into `out_fd`, or into the file
// `output` when out_fd is -1. The pid, or -1 with *error set to the errno.
pid_t launch(const std::vector<std::string>& argv, int out_fd, const std::filesystem::path& output, int* error) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (out_fd >= 0)
    posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
  else
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  *error = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return *error == 0 ? pid : -1;
}

}  // namespace

pid_t spawn(const std::vector<std::string>& argv, const std::filesystem::path& output) {
  int error = 0;
  const pid_t pid = launch(argv, -1, output, &error);
  if (pid < 0) throw std::runtime_error(fmt::format("cannot start {}: {}", argv[0], std::strerror(error)));
  return pid;
}

Captured capture(const std::vector<std::string>& argv) {
  Captured out;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return out;
  int error = 0;
  const pid_t pid = launch(argv, fds[1], {}, &error);
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    out.output = fmt::format("cannot start {}: {}", argv[0], std::strerror(error));
    return out;
  }
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n > 0) out.output.append(buf, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  ::close(fds[0]);
  out.status = wait_exit(pid);
  return out;
}

int wait_exit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

ProcessPool::ProcessPool(RunnerOptions options, unsigned workers) : o_(std::move(options)), workers_(std::max(1u, workers)) {}

std::vector<RunOutcome> ProcessPool::run(const std::vector<RunRequest>& batch) {
  std::vector<RunOutcome> out(batch.size());
  struct Running {
    size_t index;
    pid_t pid;
    int pidfd;
  };
  std::vector<Running> running;
  size_t next = 0;
  while (next < batch.size() || !running.empty()) {
    while (next < batch.size() && running.size() < workers_) {
      const auto dir = run_dir(o_, batch[next]);
      std::filesystem::create_directories(dir);
      const pid_t pid = spawn(run_command(o_, batch[next]), dir / "log.txt");
      // glibc 2.36's <sys/pidfd.h> lacks extern "C" for C++; the system call it wraps:
      const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
      if (fd < 0) throw std::runtime_error(fmt::format("pidfd_open: {}", std::strerror(errno)));
      running.push_back({next++, pid, fd});
    }
    // Sleep until one of the workers exits (its pidfd becomes readable).
    std::vector<pollfd> fds;
    for (const Running& r : running) fds.push_back({r.pidfd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR)
      throw std::runtime_error(fmt::format("poll: {}", std::strerror(errno)));
    for (size_t i = fds.size(); i-- > 0;) {
      if ((fds[i].revents & POLLIN) == 0) continue;
      const Running r = running[i];
      ::close(r.pidfd);
      out[r.index] = collect(o_, batch[r.index], wait_exit(r.pid));
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  return out;
}

}  // namespace rdmad::sim::tune
