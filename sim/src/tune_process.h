#pragma once
// Child processes of the tuning advisor: rdmad-sim workers and the Slurm commands.
#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace rdmad::sim::tune {

// Starts argv (argv[0] looked up in PATH) with stdin /dev/null and stdout and stderr into `output`.
pid_t spawn(const std::vector<std::string>& argv, const std::filesystem::path& output);
// Waits for `pid`; its exit status, or 128 + the signal that ended it.
int wait_exit(pid_t pid);

struct Captured {
  int status = -1;     // exit status; -1 when it could not start
  std::string output;  // stdout and stderr together
};
// Runs argv to its end and captures what it printed.
Captured capture(const std::vector<std::string>& argv);

}  // namespace rdmad::sim::tune
