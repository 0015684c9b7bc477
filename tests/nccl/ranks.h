// Ranks of the NCCL plugin's tests: nccl_harness processes (tests/nccl/harness.cc), each on one
// node's daemon, driving the built plugin as NCCL does. Used by plugin_test (host) and by the
// vm_dmabuf guest test (GPU memory with a real dma-buf).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "integration/flow/flow_cluster.h"

namespace rdmad::test {

inline std::string plugin_path() { return binary("nccl/libnccl-net-rdmad.so"); }

// One rank: the harness on a node's daemon.
inline std::unique_ptr<Subprocess> rank(Node& node, const TempDir& dir, int r, int n,
                                        const std::vector<std::string>& args, int abi = 10,
                                        const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {binary("tests/nccl/nccl_harness"),
                                   "--plugin",
                                   plugin_path(),
                                   "--abi",
                                   std::to_string(abi),
                                   "--rank",
                                   std::to_string(r),
                                   "--nranks",
                                   std::to_string(n),
                                   "--dir",
                                   dir.path()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> e = {"RDMAD_SOCKET=" + node.socket_path(), "RDMAD_NCCL_SOCKET_IFNAME=lo"};
  e.insert(e.end(), env.begin(), env.end());
  return std::make_unique<Subprocess>(argv, e);
}

// Waits for every rank to exit 0 and to have printed `done`.
inline void expect_all_done(std::vector<std::unique_ptr<Subprocess>>& ranks, const std::string& done,
                            std::chrono::milliseconds deadline) {
  for (size_t i = 0; i < ranks.size(); ++i) {
    auto code = ranks[i]->wait_exit(deadline);
    EXPECT_EQ(code, 0) << "rank " << i << ":\n" << ranks[i]->output();
    EXPECT_NE(ranks[i]->output().find(done), std::string::npos) << "rank " << i << ":\n"
                                                                << ranks[i]->output();
  }
}

// What the plugin said when a comm closed (its close line, logged at INFO through NCCL's logger).
struct CommClose {
  bool send = false;
  uint64_t messages = 0, bytes = 0, staged_bytes = 0;
};

inline std::vector<CommClose> comm_closes(const std::string& output) {
  static const std::regex line(
      R"(close(Send|Recv): comm with node \S+: (\d+) messages, (\d+) bytes, (\d+) bytes of them staged)");
  std::vector<CommClose> out;
  for (std::sregex_iterator i(output.begin(), output.end(), line), end; i != end; ++i)
    out.push_back({(*i)[1] == "Send", std::stoull((*i)[2]), std::stoull((*i)[3]), std::stoull((*i)[4])});
  return out;
}

}  // namespace rdmad::test
