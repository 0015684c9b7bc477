// The rdma_core backend's registration and capabilities against its behaviour. Without a device
// only the "nothing is advertised, nothing opens" half runs; with one (a NIC or Soft-RoCE) the
// device half checks dma-buf, queue and CQ limits.
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "split_keys.h"  // the backend's own (its src/)
#include "verbs_test_util.h"

namespace rdmad::verbs::test {
namespace {

TEST(RdmaCoreRegistry, RegisteredAndListsLibibverbsDevices) {
  const BackendInfo* b = registry().find("rdma_core");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->name, "rdma_core");
  EXPECT_EQ(b->list_devices(), rdma_core::list_device_names());
}

TEST(RdmaCoreCapabilities, NoDeviceAdvertisesNothingAndOpenSaysWhy) {
  const BackendInfo* b = registry().find("rdma_core");
  ASSERT_NE(b, nullptr);
  if (!b->list_devices().empty()) GTEST_SKIP() << "this host has RDMA devices (see the device half)";
  const Capabilities& c = b->caps;
  EXPECT_FALSE(c.dmabuf_mr);
  EXPECT_FALSE(c.software_cc);
  EXPECT_EQ(c.max_mr_size, 0u);
  EXPECT_EQ(c.max_qp, 0u);
  EXPECT_EQ(c.max_qp_wr, 0u);
  EXPECT_EQ(c.max_cq_depth, 0u);
  auto r = registry().open("rdma_core", DeviceConfig{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "no RDMA device: ibv_get_device_list found 0 devices");
  DeviceConfig named;
  named.name = "mlx5_0";
  EXPECT_FALSE(registry().open("rdma_core", named).ok());
}

TEST(RdmaCoreCapabilities, DeviceMatchesBehaviour) {
  std::string skip;
  auto d = open_device("rdma_core", DeviceConfig{}, &skip);
  if (!d) GTEST_SKIP() << skip;
  const Capabilities& caps = registry().find("rdma_core")->caps;
  Endpoint e;
  make_endpoint(e, std::move(d), 16);
  // fd -1: EBADF (an error, not "not supported") exactly where the probe said dma-buf works.
  auto dm = e.pd->reg_dmabuf_mr(-1, 0, 4096, 0, kAccessLocalWrite);
  ASSERT_FALSE(dm.ok());
  EXPECT_EQ(dm.status().code() == StatusCode::kNotSupported, !caps.dmabuf_mr) << dm.status().message();
  EXPECT_FALSE(caps.software_cc);
  EXPECT_GT(caps.max_mr_size, 0u);
  EXPECT_FALSE(e.dev->create_cq(caps.max_cq_depth + 1).ok());
  QpInitAttr ia;
  ia.send_cq = e.scq.get();
  ia.recv_cq = e.rcq.get();
  ia.max_send_wr = caps.max_qp_wr + 1;
  EXPECT_FALSE(e.pd->create_qp(ia).ok()) << "max_qp_wr + 1 accepted";
  std::vector<uint8_t> buf(1 << 20);
  auto mr = e.pd->reg_mr(buf.data(), buf.size(), kAccessLocalWrite | kAccessRemoteRead);
  ASSERT_TRUE(mr.ok()) << mr.status().message();
  const rdma_core::SplitKeys* keys = rdma_core::region_slices(*mr.value());
  ASSERT_NE(keys, nullptr);
  EXPECT_EQ(keys->count, 1u);
  EXPECT_EQ(keys->lkeys[0], mr.value()->lkey());
  EXPECT_EQ(mr.value()->length(), buf.size());
  EXPECT_FALSE(mr.value()->remote_slices()) << "one slice: rkey() covers it";
}

// The capabilities that say how the daemon treats hardware NICs behave as advertised.
TEST(RdmaCoreCapabilities, HandlingMatchesBehaviour) {
  const BackendInfo* b = registry().find("rdma_core");
  ASSERT_NE(b, nullptr);
  const Capabilities& caps = b->caps;
  EXPECT_TRUE(caps.sysfs_ports && caps.opens_named_device && caps.address_selects_gid && caps.retries_failed_open);
  EXPECT_FALSE(caps.needs_address);
  ASSERT_TRUE(b->discover && b->watch_addresses);
  // sysfs_ports: discover() lists every device libibverbs does, with sysfs facts.
  auto host = b->discover(HostScan{});
  ASSERT_TRUE(host.ok()) << host.status().message();
  EXPECT_EQ(host.value().devices, b->list_devices());
  const auto names = b->list_devices();
  if (names.empty()) GTEST_SKIP() << "no RDMA device: the device half needs one";
  // opens_named_device: the device opened is the one named, on the port named.
  DeviceConfig named;
  named.name = names.back();
  auto d = registry().open("rdma_core", named);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d.value()->info().name, names.back());
  named.backend_options["port"] = 99;
  EXPECT_FALSE(registry().open("rdma_core", named).ok()) << "port 99 accepted";
  // registration_faults_in_pages: registering makes untouched pages resident (pinned).
  auto pd = d.value()->alloc_pd();
  ASSERT_TRUE(pd.ok()) << pd.status().message();
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t bytes = 16 * page;
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  {
    auto mr = pd.value()->reg_mr(mem, bytes, kAccessLocalWrite);
    ASSERT_TRUE(mr.ok()) << mr.status().message();
    std::vector<unsigned char> v(bytes / page);
    ASSERT_EQ(mincore(mem, bytes, v.data()), 0);
    for (unsigned char c : v) EXPECT_TRUE(c & 1) << "a registered page is not resident";
  }
  munmap(mem, bytes);
}

}  // namespace
}  // namespace rdmad::verbs::test
