#include "rdmad/verbs/rdma_core/device_discovery.h"

#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <algorithm>

namespace rdmad::verbs::rdma_core {
namespace {

// Through the real libibverbs of this machine: a machine without RDMA devices gets an empty list,
// not an error; a machine with devices gets exactly the ones sysfs lists.
TEST(DeviceDiscovery, RealLibibverbsMatchesSysfs) {
  const nic_cc::SysfsRoot host;
  const auto found = discover_devices(host);
  ASSERT_TRUE(found.ok()) << found.error().message();
  const auto in_sysfs = host.list("/sys/class/infiniband");
  ASSERT_EQ(found->devices.size(), in_sysfs.size());
  for (size_t i = 0; i < in_sysfs.size(); ++i) {
    const bool listed = std::any_of(found->devices.begin(), found->devices.end(),
                                    [&](const DeviceInfo& d) { return d.name == in_sysfs[i]; });
    EXPECT_TRUE(listed) << in_sysfs[i];
  }
}

TEST(DeviceDiscovery, MtuEnumToBytes) {
  EXPECT_EQ(mtu_bytes(IBV_MTU_256), 256u);
  EXPECT_EQ(mtu_bytes(IBV_MTU_4096), 4096u);
  EXPECT_EQ(mtu_bytes(0), 0u);
}

}  // namespace
}  // namespace rdmad::verbs::rdma_core
