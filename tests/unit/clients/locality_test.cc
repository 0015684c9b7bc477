// Locality of registered memory to each NIC (what the flow engine gives the balancer's distance
// rule): GPU memory by the PCI tree, host memory by NUMA node, and the page-node lookup.
#include <sys/mman.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "rdmad/daemon/clients/nic_topology.h"
#include "rdmad/daemon/clients/registration_service.h"
#include "support/temp_dir.h"

namespace rdmad::clients {
namespace {

namespace fs = std::filesystem;

// Socket 0: root complex pci0000:00 with a switch (root port 00:01.0) holding GPU 01:00.0 and
// NIC 02:00.0, and another root port 00:02.0 with NIC 03:00.0; socket 1: NIC 81:00.0.
class Tree {
 public:
  Tree() {
    add("0000:01:00.0", "pci0000:00/0000:00:01.0/0000:01:00.0", 0);
    add("0000:02:00.0", "pci0000:00/0000:00:01.0/0000:02:00.0", 0);
    add("0000:03:00.0", "pci0000:00/0000:00:02.0/0000:03:00.0", 0);
    add("0000:81:00.0", "pci0000:80/0000:80:01.0/0000:81:00.0", 1);
  }
  const std::string& root() const { return dir_.path(); }

 private:
  void add(const std::string& bdf, const std::string& rel, int node) {
    fs::create_directories(dir_.path() + "/sys/devices/" + rel);
    std::ofstream(dir_.path() + "/sys/devices/" + rel + "/numa_node") << node << "\n";
    fs::create_directories(dir_.path() + "/sys/bus/pci/devices");
    fs::create_directory_symlink("../../../devices/" + rel, dir_.path() + "/sys/bus/pci/devices/" + bdf);
  }
  test::TempDir dir_;
};

const std::vector<NicDescriptor> kNics = {{"near", "rdma_core", "0000:02:00.0", RDMAD_LINK_UP, 400000, 0},
                                          {"bridge", "rdma_core", "0000:03:00.0", RDMAD_LINK_UP, 400000, 0},
                                          {"far", "rdma_core", "0000:81:00.0", RDMAD_LINK_UP, 400000, 1},
                                          {"soft0", "soft", "", RDMAD_LINK_UP, 100000, -1}};

TEST(Locality, GpuMemoryByThePciTree) {
  Tree t;
  auto l = nic_localities(kNics, RDMAD_MEM_GPU, -1, "0000:01:00.0", t.root());
  EXPECT_EQ(l, (std::vector<Locality>{Locality::kSameSwitch, Locality::kHostBridge, Locality::kCrossSocket,
                                      Locality::kHostBridge}));
  // A GPU the daemon cannot place (not told, or not in sysfs): nothing is known to be far.
  for (const std::string gpu : {"", "0000:99:00.0"}) {
    for (Locality x : nic_localities(kNics, RDMAD_MEM_GPU, -1, gpu, t.root())) EXPECT_EQ(x, Locality::kHostBridge);
  }
}

TEST(Locality, HostMemoryByNumaNode) {
  Tree t;
  EXPECT_EQ(nic_localities(kNics, RDMAD_MEM_HOST, 1, "", t.root()),
            (std::vector<Locality>{Locality::kCrossSocket, Locality::kCrossSocket, Locality::kHostBridge,
                                   Locality::kHostBridge}));
  for (Locality x : nic_localities(kNics, RDMAD_MEM_HOST, -1, "", t.root())) EXPECT_EQ(x, Locality::kHostBridge);
}

TEST(Locality, PageNodeOfATouchedPage) {
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_EQ(page_numa_node(p), -1) << "not faulted in yet: no node";
  static_cast<char*>(p)[0] = 1;
  const int32_t node = page_numa_node(p);
  munmap(p, 4096);
  if (node < 0) GTEST_SKIP() << "this kernel reports no NUMA node for pages (move_pages unsupported)";
  EXPECT_GE(node, 0);
}

}  // namespace
}  // namespace rdmad::clients
