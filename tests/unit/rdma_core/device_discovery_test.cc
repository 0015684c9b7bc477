#include "device_discovery.h"

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <algorithm>

namespace rdmad::verbs::rdma_core {
namespace {

// Through the real libibverbs of this machine: a machine without RDMA devices gets an empty list,
// not an error; a machine with devices gets only devices sysfs lists (a device whose provider library
// is not installed is in sysfs but not in the verbs list).
TEST(RdmaCoreDeviceDiscovery, RealLibibverbsAgreesWithSysfs) {
  const nic_cc::SysfsRoot host;
  const auto found = discover_devices(host);
  ASSERT_TRUE(found.ok()) << found.error().message();
  const auto in_sysfs = host.list("/sys/class/infiniband");
  if (in_sysfs.empty()) {
    EXPECT_TRUE(found->devices.empty());
  }
  for (const auto& d : found->devices) {
    EXPECT_TRUE(std::find(in_sysfs.begin(), in_sysfs.end(), d.name) != in_sysfs.end()) << d.name;
    EXPECT_FALSE(d.ports.empty()) << d.name;
  }
}

TEST(RdmaCoreDeviceDiscovery, MtuEnumToBytes) {
  EXPECT_EQ(mtu_bytes(IBV_MTU_256), 256u);
  EXPECT_EQ(mtu_bytes(IBV_MTU_4096), 4096u);
  EXPECT_EQ(mtu_bytes(0), 0u);
}

}  // namespace
}  // namespace rdmad::verbs::rdma_core
