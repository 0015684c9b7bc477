#pragma once
// A real child process for integration tests: argv + extra environment, stdout and stderr
// captured (drained by a thread), signals, and waits with deadlines instead of sleeps.
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace rdmad::test {

class Subprocess {
 public:
  // Starts argv[0] with the parent's environment plus `env` ("KEY=value"). Aborts the test
  // binary if fork/exec plumbing fails.
  Subprocess(std::vector<std::string> argv, std::vector<std::string> env = {});
  ~Subprocess();  // SIGKILLs and reaps a child that is still running
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig) const;
  // Everything the child wrote to stdout and stderr so far.
  std::string output() const;
  // Waits until the output contains `needle`; returns false at the deadline or when the child
  // exits without printing it.
  bool wait_for_output(const std::string& needle, std::chrono::milliseconds deadline);
  // Waits for the child to exit; returns its exit code, 128+signal if killed, nullopt at the deadline.
  std::optional<int> wait_exit(std::chrono::milliseconds deadline);
  // Device and inode of the pipe the child writes stderr to ("dev:ino", as JOURNAL_STREAM holds).
  static std::string pipe_identity_for_test(int fd);

 private:
  void drain(int fd);
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string output_;
  bool eof_ = false;
  std::thread reader_;
};

// Path of a built binary: RDMAD_BINARY_DIR + relative path.
std::string binary(const std::string& relative);

}  // namespace rdmad::test
