// GPU memory as the daemon meets it on a GPU node, with a real dma-buf: the fake CUDA driver's
// device memory is a vgem buffer, exported with PRIME (tests/support/fake_cuda/vgem.h). Runs in an
// rxe guest (vm_dmabuf: the guest loads vgem; LD_LIBRARY_PATH puts the fake driver first):
// - the export the client library sends is a real dma-buf;
// - soft NICs register it by mapping it, and a WRITE from it and a READ into it between two
//   daemons are byte-exact;
// - an rdma_core NIC on rxe, which has no dma-buf MRs, refuses it with rxe's own answer.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "integration/flow/flow_cluster.h"
#include "nccl/ranks.h"
#include "support/cuda_driver.h"

namespace rdmad::test {
namespace {

constexpr size_t kBytes = 1 << 20;
constexpr uint32_t kGpuAccess = RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ;

std::string fd_target(int fd) {
  char buf[256] = {};
  const ssize_t n = readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

class RealDmabuf : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = cuda_.load(); !why.empty()) FAIL() << why << " (the guest script sets LD_LIBRARY_PATH)";
    ASSERT_EQ(cuda_.mem_alloc(&dptr_, kBytes), 0);
    gpu_ = reinterpret_cast<uint8_t*>(dptr_);  // the fake's device memory is mapped here
    for (size_t i = 0; i < kBytes; ++i) gpu_[i] = static_cast<uint8_t>(i * 29 + 3);
  }
  void TearDown() override {
    if (dptr_ != 0) cuda_.mem_free(dptr_);
  }
  CudaDriver cuda_;
  unsigned long long dptr_ = 0;
  uint8_t* gpu_ = nullptr;
};

TEST_F(RealDmabuf, TheDriversExportIsARealDmabuf) {
  using Export = int (*)(void*, unsigned long long, size_t, int, unsigned long long);
  auto get = reinterpret_cast<Export>(dlsym(cuda_.lib, "cuMemGetHandleForAddressRange"));
  ASSERT_NE(get, nullptr);
  int fd = -1;
  ASSERT_EQ(get(&fd, dptr_, kBytes, 1 /* DMA_BUF_FD */, 0), 0);
  const std::string target = fd_target(fd);
  EXPECT_TRUE(target.rfind("/dmabuf:", 0) == 0 || target.rfind("anon_inode:dmabuf", 0) == 0) << target;
  // It is the same memory: a mapping of the dma-buf sees what was written through the pointer.
  void* m = mmap(nullptr, kBytes, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(m, MAP_FAILED) << std::strerror(errno);
  EXPECT_EQ(std::memcmp(m, gpu_, kBytes), 0);
  munmap(m, kBytes);
  close(fd);
}

NodeSpec soft_node(const std::string& id, int octet) {
  return NodeSpec{id, {NicSpec{fmt::format("127.0.0.{}", octet), 0, ""}}, "", "", 14, {}, "127.0.0.1"};
}

TEST_F(RealDmabuf, SoftNicsRegisterItByMappingAndMoveItByteExact) {
  Pair pair(soft_node("node-a", 61), soft_node("node-b", 63));
  ASSERT_TRUE(pair.start());
  rdmad_mr* gpu_mr = nullptr;
  ASSERT_EQ(rdmad_register_gpu(pair.a->client(), dptr_, kBytes, kGpuAccess, 0, &gpu_mr), RDMAD_OK)
      << rdmad_last_error(pair.a->client());
  Buffer dst(pair.b->client(), kBytes, kAllAccess);
  std::memset(dst.data(), 0, kBytes);
  rdmad_flow* flow = nullptr;
  ASSERT_EQ(rdmad_flow_open(pair.a->client(), "node-b", nullptr, &flow), RDMAD_OK);
  ASSERT_EQ(rdmad_flow_wait_connected(flow, 20000), RDMAD_OK);
  rdmad_token token{};
  ASSERT_EQ(rdmad_export(pair.b->client(), dst.mr, 0, kBytes, "node-a",
                         RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ, &token),
            RDMAD_OK)
      << rdmad_last_error(pair.b->client());
  rdmad_remote remote{};
  ASSERT_EQ(rdmad_flow_import(flow, &token, &remote), RDMAD_OK);
  // GPU memory -> node-b.
  ASSERT_EQ(rdmad_flow_write(flow, 1, gpu_mr, 0, &remote, 0, kBytes), RDMAD_OK);
  auto c = wait_completion(flow, 60s);
  ASSERT_TRUE(c.has_value());
  ASSERT_EQ(c->status, RDMAD_OK);
  EXPECT_EQ(first_difference(gpu_, dst.data(), kBytes), -1);
  // node-b -> GPU memory (the NIC writes into the dma-buf).
  for (size_t i = 0; i < kBytes; ++i) dst.data()[i] = static_cast<uint8_t>(i * 7 + 1);
  ASSERT_EQ(rdmad_flow_read(flow, 2, gpu_mr, 0, &remote, 0, kBytes), RDMAD_OK);
  c = wait_completion(flow, 60s);
  ASSERT_TRUE(c.has_value());
  ASSERT_EQ(c->status, RDMAD_OK);
  EXPECT_EQ(first_difference(gpu_, dst.data(), kBytes), -1);
  rdmad_flow_close(flow);
  EXPECT_EQ(rdmad_deregister(pair.a->client(), gpu_mr), RDMAD_OK);
}

// The NCCL plugin's zero-copy path, the one GPU memory takes on a hardware NIC: two ranks on two
// daemons run the harness's ring AllReduce and AllGather (tests/nccl/harness.cc) on device memory
// registered as NCCL registers it (regMrDmaBuf with the driver's dma-buf for two buffers, regMr of
// CUDA memory for the third), which the soft NICs reach through their mapping of the dma-buf. The
// harness checks every element; every comm's close line must say that bytes moved and none of them
// were staged (copied). On a soft NIC the plugin itself offers NCCL host memory only (a real GPU's
// dma-buf cannot be mapped); the harness registers device memory anyway, to run this path.
TEST_F(RealDmabuf, NcclPluginMovesGpuMemoryWithoutAStagingCopy) {
  Pair pair(soft_node("node-a", 61), soft_node("node-b", 63));
  ASSERT_TRUE(pair.start());
  TempDir dir;
  const std::vector<std::string> args = {"allreduce", "--memory", "gpu", "--elements", "262144", "--iterations", "2"};
  std::vector<std::unique_ptr<Subprocess>> ranks;
  ranks.push_back(rank(*pair.a, dir, 0, 2, args));
  ranks.push_back(rank(*pair.b, dir, 1, 2, args));
  expect_all_done(ranks, "allreduce done", 240s);
  for (auto& r : ranks) {
    const std::string out = r->output();
    const auto closes = comm_closes(out);
    EXPECT_EQ(closes.size(), 2u) << out;  // its send comm and its recv comm
    for (const CommClose& c : closes) {
      EXPECT_GT(c.bytes, 0u) << out;
      EXPECT_EQ(c.staged_bytes, 0u) << out;
    }
    EXPECT_EQ(out.find("host memory is copied"), std::string::npos) << out;
  }
}

TEST_F(RealDmabuf, RxeRefusesItWithItsOwnAnswer) {
  NodeSpec spec{"node-x", {}, "[[nic]]\nname = \"rail0\"\nbackend = \"rdma_core\"\ndevice = \"rxe0\"\n", "", 14, {},
                "10.1.0.1"};
  Node node(spec, free_port(SOCK_STREAM));
  ASSERT_TRUE(node.start({}));
  rdmad_mr* mr = nullptr;
  const rdmad_status s = rdmad_register_gpu(node.client(), dptr_, kBytes, kGpuAccess, 0, &mr);
  EXPECT_EQ(s, RDMAD_ERR_NOT_SUPPORTED) << rdmad_last_error(node.client());
  const std::string why = rdmad_last_error(node.client());
  EXPECT_NE(why.find("rail0"), std::string::npos) << why;
  EXPECT_NE(why.find("dma-buf"), std::string::npos) << why;
}

}  // namespace
}  // namespace rdmad::test
