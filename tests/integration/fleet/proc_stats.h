#pragma once
// A process's CPU time and resident memory from /proc (stat, status), and its threads' CPU time
// by thread name, for the fleet's figures. Header-only, free of GoogleTest.
#include <dirent.h>
#include <sys/types.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace rdmad::test::fleet {

struct ProcSample {
  double cpu_s = 0;   // utime + stime
  double rss_mib = 0;  // VmRSS
};

namespace detail {
// utime + stime of a /proc/<pid>[/task/<tid>]/stat file, in seconds; the name in *comm.
inline double stat_cpu_seconds(const std::string& path, std::string* comm = nullptr) {
  std::ifstream f(path);
  std::string line;
  if (!std::getline(f, line)) return 0;
  const auto open = line.find('('), close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos) return 0;
  if (comm != nullptr) *comm = line.substr(open + 1, close - open - 1);
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  // Fields after the name start at 3 (state); utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}
}  // namespace detail

inline ProcSample sample(pid_t pid) {
  ProcSample s;
  s.cpu_s = detail::stat_cpu_seconds("/proc/" + std::to_string(pid) + "/stat");
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) s.rss_mib = std::stod(line.substr(6)) / 1024.0;
  return s;
}

/// CPU seconds of each of the process's threads, summed by thread name.
inline std::map<std::string, double> thread_cpu(pid_t pid) {
  std::map<std::string, double> by_name;
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(task.c_str());
  if (d == nullptr) return by_name;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string comm;
    const double s = detail::stat_cpu_seconds(task + "/" + e->d_name + "/stat", &comm);
    by_name[comm] += s;
  }
  ::closedir(d);
  return by_name;
}

}  // namespace rdmad::test::fleet
