#include "support/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace rdmad::test {

namespace {
[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "subprocess: %s: %s\n", what, std::strerror(errno));
  std::abort();
}
}  // namespace

Subprocess::Subprocess(std::vector<std::string> argv, std::vector<std::string> env) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) die("pipe2");
  // The journal test needs the pipe's identity before exec, so expose it through the env hook.
  for (auto& e : env) {
    if (e == "JOURNAL_STREAM=@pipe") e = "JOURNAL_STREAM=" + pipe_identity_for_test(fds[1]);
  }
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0) die("fork");
  if (pid_ == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    for (auto& e : env) putenv(e.data());
    execv(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  reader_ = std::thread([this, fd = fds[0]] { drain(fd); });
}

Subprocess::~Subprocess() {
  if (!exit_code_) {
    ::kill(pid_, SIGKILL);
    wait_exit(std::chrono::seconds(10));
  }
  if (reader_.joinable()) reader_.join();
}

std::string Subprocess::pipe_identity_for_test(int fd) {
  struct stat st {};
  fstat(fd, &st);
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

void Subprocess::drain(int fd) {
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    std::lock_guard lock(mu_);
    if (n <= 0) {
      eof_ = true;
      cv_.notify_all();
      break;
    }
    output_.append(buf, static_cast<size_t>(n));
    cv_.notify_all();
  }
  close(fd);
}

void Subprocess::signal(int sig) const { ::kill(pid_, sig); }

std::string Subprocess::output() const {
  std::lock_guard lock(mu_);
  return output_;
}

bool Subprocess::wait_for_output(const std::string& needle, std::chrono::milliseconds deadline) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, deadline, [&] { return output_.find(needle) != std::string::npos || eof_; }) &&
         output_.find(needle) != std::string::npos;
}

std::optional<int> Subprocess::wait_exit(std::chrono::milliseconds deadline) {
  if (exit_code_) return exit_code_;
  const auto end = std::chrono::steady_clock::now() + deadline;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      // Let the reader take everything the child wrote before it exited (EOF on the pipe).
      std::unique_lock lock(mu_);
      cv_.wait_until(lock, end, [&] { return eof_; });
      return exit_code_;
    }
    if (std::chrono::steady_clock::now() >= end) return std::nullopt;
    // Poll the child's state every millisecond: a bounded wait, not a sleep standing in for a signal.
    usleep(1000);
  }
}

std::string binary(const std::string& relative) { return std::string(RDMAD_BINARY_DIR) + "/" + relative; }

}  // namespace rdmad::test
