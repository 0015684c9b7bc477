// Helpers of the lifecycle attacks: one rdmad process with a client socket and metrics in a temp
// dir, its metrics, and a peer key file the way an operator writes one.
#pragma once

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "support/http_get.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace rdmad::test {

using namespace std::chrono_literals;

// A daemon with its socket and runtime dir in `dir`, metrics on a free port and, with `soft_nic`,
// one soft NIC on loopback (so that clients can register memory).
inline std::string daemon_config(const TempDir& dir, bool soft_nic = false) {
  std::string t = fmt::format(
      "[daemon]\nruntime_dir = \"{0}/run\"\nsocket_path = \"{0}/run/rdmad.sock\"\nlog_level = \"info\"\n"
      "[metrics]\nlisten = \"127.0.0.1:0\"\n",
      dir.path());
  if (soft_nic) t += "[[nic]]\nname = \"lo0\"\nbackend = \"soft\"\naddress = \"127.0.0.1\"\nudp_port = 0\n";
  return t;
}

// A key file of 32 random bytes, mode 0600, as [peer] key_file wants it.
inline std::string write_key_file(const TempDir& dir) {
  const std::string path = dir.path() + "/peer.key";
  unsigned char key[32];
  EXPECT_EQ(getrandom(key, sizeof key, 0), static_cast<ssize_t>(sizeof key));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, key, sizeof key), static_cast<ssize_t>(sizeof key));
  ::close(fd);
  ::chmod(path.c_str(), 0600);
  return path;
}

// rdmad on `config`, ready; metrics_port() from its log.
class Daemon {
 public:
  explicit Daemon(const std::string& config) {
    proc_ = std::make_unique<Subprocess>(std::vector<std::string>{binary("daemon/rdmad"), "--config", config});
    if (!proc_->wait_for_output("] ready", 15s)) {
      ADD_FAILURE() << "rdmad did not start:\n" << proc_->output();
      return;
    }
    std::smatch m;
    const std::string out = proc_->output();
    if (std::regex_search(out, m, std::regex(R"(serving metrics url=http://127\.0\.0\.1:(\d+)/metrics)")))
      port_ = std::stoi(m[1]);
  }
  Subprocess& process() { return *proc_; }
  int metrics_port() const { return port_; }

  // One sample of `series` ("name{labels}") from /metrics.
  std::optional<double> metric(const std::string& series) const {
    auto r = http_get("127.0.0.1", port_, "/metrics");
    if (!r) return std::nullopt;
    const std::string& b = r->body;
    for (size_t pos = b.find(series); pos != std::string::npos; pos = b.find(series, pos + 1)) {
      if (pos > 0 && b[pos - 1] != '\n') continue;
      const size_t sp = pos + series.size();
      if (sp >= b.size() || b[sp] != ' ') continue;
      return std::stod(b.substr(sp + 1, b.find('\n', sp) - sp - 1));
    }
    return std::nullopt;
  }
  // Polls the metric until it equals `want` or the deadline passes.
  bool metric_reaches(const std::string& series, double want, std::chrono::milliseconds deadline) const {
    const auto end = std::chrono::steady_clock::now() + deadline;
    do {
      if (metric(series) == want) return true;
      usleep(10'000);
    } while (std::chrono::steady_clock::now() < end);
    return false;
  }

 private:
  std::unique_ptr<Subprocess> proc_;
  int port_ = 0;
};

}  // namespace rdmad::test
