// The flow engine's NUMA distance of a host buffer to a NIC (fed to the balancer's PCI-distance
// rule), and the page-node lookup the registration table uses.
#include <sys/mman.h>

#include <gtest/gtest.h>

#include "flow_engine.h"

namespace rdmad::flow {
namespace {

using balancer::PciDistance;

TEST(FlowDistance, SameNodeIsNearOtherNodeIsFarUnknownIsNear) {
  EXPECT_EQ(host_distance(0, 0), PciDistance::kHostBridge);
  EXPECT_EQ(host_distance(1, 1), PciDistance::kHostBridge);
  EXPECT_EQ(host_distance(0, 1), PciDistance::kCrossSocket);
  EXPECT_EQ(host_distance(1, 0), PciDistance::kCrossSocket);
  // Unknown on either side: nothing is known to be far, so no NIC is left out for it.
  EXPECT_EQ(host_distance(-1, 1), PciDistance::kHostBridge);
  EXPECT_EQ(host_distance(0, -1), PciDistance::kHostBridge);
}

TEST(FlowDistance, PageNodeOfATouchedPage) {
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_EQ(ipc::page_numa_node(p), -1) << "not faulted in yet: no node";
  static_cast<char*>(p)[0] = 1;
  const int32_t node = ipc::page_numa_node(p);
  if (node < 0) {
    munmap(p, 4096);
    GTEST_SKIP() << "this kernel reports no NUMA node for pages (move_pages unsupported)";
  }
  EXPECT_GE(node, 0);
  munmap(p, 4096);
}

}  // namespace
}  // namespace rdmad::flow
