// GPUDirect diagnosis and NIC locality against fake /proc and /sys trees.
#include "rdmad/daemon/clients/diagnose.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "rdmad/daemon/clients/nic_topology.h"
#include "support/doubles/soft_registrar.h"
#include "server_fixture.h"

namespace rdmad::clients {
namespace {

namespace fs = std::filesystem;

void write_file(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

class YesRegistrar : public MemoryRegistrar {
 public:
  Result<MemoryRegion> register_host(void*, uint64_t, uint32_t, uint32_t) override { return MemoryRegion{}; }
  Result<MemoryRegion> register_dmabuf(int, uint64_t, uint64_t, uint64_t, uint32_t, uint32_t) override {
    return MemoryRegion{};
  }
  void deregister(uint64_t) override {}
  DmabufSupport probe_dmabuf(uint32_t) override { return {true, "ibv_reg_dmabuf_mr probe returned EBADF"}; }
  std::string backend_name() const override { return "rdma_core"; }
};

TEST(Diagnose, OpenModuleNewKernelHardwareNicIsAvailable) {
  test::TempDir root;
  write_file(root.path() + "/proc/sys/kernel/osrelease", "6.1.0-18-amd64\n");
  write_file(root.path() + "/proc/driver/nvidia/version",
             "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.104.05  Release Build\n");
  YesRegistrar reg;
  std::string text = diagnose_gpudirect(root.path(), {{"mlx5_0", "rdma_core", "0000:17:00.0"}}, reg);
  EXPECT_NE(text.find("ok kernel: 6.1.0-18-amd64"), std::string::npos) << text;
  EXPECT_NE(text.find("ok gpu-driver: NVIDIA open kernel module"), std::string::npos) << text;
  EXPECT_NE(text.find("info nvidia-peermem: not loaded"), std::string::npos) << text;
  EXPECT_NE(text.find("ok dmabuf mlx5_0: supported"), std::string::npos) << text;
  EXPECT_NE(text.find("ok gpudirect: available through dma-buf on 1 NIC(s)"), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 5);
}

TEST(Diagnose, ProprietaryModuleOldKernelSoftNicNamesEveryReason) {
  test::TempDir root;
  write_file(root.path() + "/proc/sys/kernel/osrelease", "5.4.0-150-generic\n");
  write_file(root.path() + "/proc/driver/nvidia/version",
             "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Release Build\n");
  write_file(root.path() + "/sys/module/nvidia_peermem/version", "1.1\n");
  SoftRegistrar reg(1);
  std::string text = diagnose_gpudirect(root.path(), {{"soft0", "soft", ""}}, reg);
  EXPECT_NE(text.find("fail kernel: 5.4.0-150-generic is older than 5.12"), std::string::npos) << text;
  EXPECT_NE(text.find("fail gpu-driver: NVIDIA proprietary kernel module"), std::string::npos) << text;
  EXPECT_NE(text.find("info nvidia-peermem: loaded, version 1.1"), std::string::npos) << text;
  EXPECT_NE(text.find("fail dmabuf soft0: not supported by backend soft"), std::string::npos) << text;
  EXPECT_NE(text.find("fail gpudirect: unavailable, failed checks: kernel, gpu-driver, dmabuf soft0"),
            std::string::npos)
      << text;
}

TEST(Diagnose, MissingDriverAndNoNics) {
  test::TempDir root;
  SoftRegistrar reg(0);
  std::string text = diagnose_gpudirect(root.path(), {}, reg);
  EXPECT_NE(text.find("warn kernel: cannot read"), std::string::npos) << text;
  EXPECT_NE(text.find("fail gpu-driver: no NVIDIA kernel driver loaded"), std::string::npos) << text;
  EXPECT_NE(text.find("fail nics: no NIC found"), std::string::npos) << text;
  EXPECT_NE(text.find("fail gpudirect"), std::string::npos) << text;
}

// GPU 0000:01:00.0 and NIC mlx5_0 behind the same root port; mlx5_1 on the other socket.
TEST(NicTopology, GpuPrefersTheNicUnderTheSameSwitch) {
  test::TempDir root;
  std::string devices = root.path() + "/sys/devices";
  fs::create_directories(devices + "/pci0000:00/0000:00:01.0/0000:01:00.0");
  fs::create_directories(devices + "/pci0000:00/0000:00:01.0/0000:02:00.0");
  fs::create_directories(devices + "/pci0000:80/0000:80:01.0/0000:81:00.0");
  fs::create_directories(root.path() + "/sys/bus/pci/devices");
  auto link = [&](const std::string& bdf, const std::string& rel) {
    fs::create_directory_symlink("../../../devices/" + rel, root.path() + "/sys/bus/pci/devices/" + bdf);
  };
  link("0000:01:00.0", "pci0000:00/0000:00:01.0/0000:01:00.0");
  link("0000:02:00.0", "pci0000:00/0000:00:01.0/0000:02:00.0");
  link("0000:81:00.0", "pci0000:80/0000:80:01.0/0000:81:00.0");
  std::vector<NicDescriptor> nics = {{"mlx5_1", "rdma_core", "0000:81:00.0", RDMAD_LINK_UP, 400000, 1},
                                     {"mlx5_0", "rdma_core", "0000:02:00.0", RDMAD_LINK_UP, 400000, 0},
                                     {"soft0", "soft", "", RDMAD_LINK_UP, 100000, 0}};
  proto::NearestNicsRequest gpu{RDMAD_MEM_GPU, -1, {}};
  proto::copy_cstr(gpu.pci_address, "0000:01:00.0");
  auto near = nearest_nics(nics, gpu, root.path());
  ASSERT_TRUE(near.ok());
  EXPECT_EQ(near.value(), std::vector<uint32_t>{1});

  proto::NearestNicsRequest host{RDMAD_MEM_HOST, 1, {}};
  EXPECT_EQ(nearest_nics(nics, host, root.path()).value(), std::vector<uint32_t>{0});
  host.numa_node = -1;  // unknown: every NIC
  EXPECT_EQ(nearest_nics(nics, host, root.path()).value().size(), 3u);

  proto::copy_cstr(gpu.pci_address, "0000:99:00.0");
  auto missing = nearest_nics(nics, gpu, root.path());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().status, RDMAD_ERR_NOT_FOUND);
}

}  // namespace
}  // namespace rdmad::clients
