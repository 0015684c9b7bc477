// The real thing where it exists: a 2-rank NCCL AllReduce on GPU memory, NCCL (libnccl.so.2,
// loaded with dlopen by nccl_gpu_rank) running with NCCL_NET_PLUGIN=rdmad over two local rdmad
// daemons with two soft NICs each, checked exactly, and the daemons' flows must have carried it.
// Skips with the reason unless libnccl, the CUDA runtime and a GPU are present (these project
// machines have libnccl and libcudart in /usr/local/cuda but no GPU or driver). With one GPU both
// ranks use it, each with its own NCCL_HOSTID, so NCCL joins them through the network plugin.
#include "../integration/flow/fabric_pair.h"

namespace rdmad::test {
namespace {

TEST(NcclGpu, TwoRankAllReduceOnGpuMemoryThroughThePlugin) {
  Subprocess probe({binary("tests/nccl/nccl_gpu_rank"), "--probe"});
  const auto probed = probe.wait_exit(60s);
  ASSERT_TRUE(probed.has_value()) << probe.output();
  if (*probed == 77) GTEST_SKIP() << probe.output();
  ASSERT_EQ(*probed, 0) << probe.output();

  Pair pair{two_nic_node("node-a", 11), two_nic_node("node-b", 21)};
  ASSERT_TRUE(pair.start());
  TempDir dir;
  const std::string plugin_dir = binary("nccl");
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < 2; ++r) {
    Node& node = r == 0 ? *pair.a : *pair.b;
    const char* ld = std::getenv("LD_LIBRARY_PATH");
    ranks.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{binary("tests/nccl/nccl_gpu_rank"), "--rank", std::to_string(r), "--nranks", "2",
                                 "--dir", dir.path(), "--elements", std::to_string(4 << 20)},
        std::vector<std::string>{"RDMAD_SOCKET=" + node.socket_path(), "RDMAD_NCCL_SOCKET_IFNAME=lo",
                                 "NCCL_NET_PLUGIN=rdmad", "NCCL_NET=rdmad", "NCCL_HOSTID=rdmad-gpu-test-" + std::to_string(r),
                                 "NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1", "NCCL_DEBUG=INFO",
                                 "LD_LIBRARY_PATH=" + plugin_dir + ":/usr/local/cuda/lib64" +
                                     (ld != nullptr ? std::string(":") + ld : std::string())}));
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ranks[r]->wait_exit(300s), 0) << "rank " << r << ":\n" << ranks[r]->output();
    EXPECT_NE(ranks[r]->output().find("allreduce ok"), std::string::npos) << ranks[r]->output();
  }
  // NCCL_NET=rdmad makes NCCL fail rather than fall back; the bytes went through the daemons.
  const double sent = pair.a->metric("rdmad_balancer_bytes_sent_total{device=\"node-a0\"}").value_or(0) +
                      pair.a->metric("rdmad_balancer_bytes_sent_total{device=\"node-a1\"}").value_or(0);
  EXPECT_GE(sent, double{4 << 20} * sizeof(float) / 2) << pair.a->output();
}

}  // namespace
}  // namespace rdmad::test
