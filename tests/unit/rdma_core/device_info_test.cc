#include "device_info.h"

#include <gtest/gtest.h>

#include "unit/nic_cc/sysfs_fixture.h"

namespace rdmad::verbs::rdma_core {
namespace {

using nic_cc::SysfsRoot;
using rdmad::testing::sysfs_fixture;

TEST(RdmaCoreParseRate, ReadsGigabitsAsMegabits) {
  EXPECT_EQ(parse_rate_mbps("400 Gb/sec (4X NDR)"), 400000u);
  EXPECT_EQ(parse_rate_mbps("2.5 Gb/sec (1X SDR)\n"), 2500u);
  EXPECT_EQ(parse_rate_mbps("25 Gb/sec (1X EDR)"), 25000u);
  EXPECT_EQ(parse_rate_mbps("56 Gb/sec (4X FDR)"), 56000u);
  EXPECT_FALSE(parse_rate_mbps("fast"));
  EXPECT_FALSE(parse_rate_mbps("10 Mb/sec"));
  EXPECT_FALSE(parse_rate_mbps(""));
}

TEST(RdmaCoreParseState, SplitsNumberAndName) {
  EXPECT_EQ(parse_state("4: ACTIVE\n"), (std::pair<int, std::string>{4, "ACTIVE"}));
  EXPECT_EQ(parse_state("5: LinkUp"), (std::pair<int, std::string>{5, "LinkUp"}));
  EXPECT_EQ(parse_state("garbage"), (std::pair<int, std::string>{0, "garbage"}));
}

TEST(RdmaCoreRoceMtu, LargestIbMtuThatFitsWithRoceHeaders) {
  EXPECT_EQ(roce_active_mtu(9000), 4096u);
  EXPECT_EQ(roce_active_mtu(1500), 1024u);
  EXPECT_EQ(roce_active_mtu(4096 + 88), 4096u);
  EXPECT_EQ(roce_active_mtu(4096 + 87), 2048u);
  EXPECT_EQ(roce_active_mtu(256 + 88), 256u);
  EXPECT_EQ(roce_active_mtu(300), 0u);
}

TEST(RdmaCoreDiscoverSysfs, DualPortConnectX6DxRoceHost) {
  const auto devs = discover_sysfs(SysfsRoot(sysfs_fixture("roce-cx6dx")));
  ASSERT_EQ(devs.size(), 2u);
  const auto& d = devs[0];
  EXPECT_EQ(d.name, "mlx5_0");
  EXPECT_EQ(d.sysfs_path, "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/infiniband/mlx5_0");
  EXPECT_EQ(d.pci_address, "0000:3b:00.0");
  EXPECT_EQ(d.numa_node, 0);
  EXPECT_EQ(d.hca_type, "MT4125");
  EXPECT_EQ(d.fw_ver, "22.39.1002");
  EXPECT_EQ(d.netdevs, std::vector<std::string>{"enp59s0f0np0"});
  ASSERT_EQ(d.ports.size(), 1u);
  const auto& p = d.ports[0];
  EXPECT_EQ(p.link_layer, LinkLayer::kEthernet);
  EXPECT_TRUE(p.active());
  EXPECT_EQ(p.state_text, "ACTIVE");
  EXPECT_EQ(p.phys_state, 5);
  EXPECT_EQ(p.rate_mbps, 100000u);
  EXPECT_EQ(p.netdev, "enp59s0f0np0");
  EXPECT_EQ(p.netdev_mtu, 9000u);
  EXPECT_EQ(p.active_mtu_bytes, 4096u);
  EXPECT_EQ(devs[1].pci_address, "0000:3b:00.1");
  EXPECT_EQ(devs[1].ports[0].netdev, "enp59s0f1np1");
  EXPECT_EQ(describe(d)[0],
            "mlx5_0 port 1: Ethernet ACTIVE 100 Gb/s mtu 4096 netdev enp59s0f0np0 pci 0000:3b:00.0 numa 0 "
            "fw 22.39.1002");
}

TEST(RdmaCoreDiscoverSysfs, InfinibandHdrHost) {
  const auto devs = discover_sysfs(SysfsRoot(sysfs_fixture("ib-hdr")));
  ASSERT_EQ(devs.size(), 2u);
  const auto& up = devs[0].ports.at(0);
  EXPECT_EQ(up.link_layer, LinkLayer::kInfiniBand);
  EXPECT_TRUE(up.active());
  EXPECT_EQ(up.rate_mbps, 200000u);
  EXPECT_EQ(up.lid, 0x1a);
  EXPECT_TRUE(up.netdev.empty());
  EXPECT_EQ(devs[0].numa_node, 1);
  EXPECT_EQ(devs[0].pci_address, "0000:81:00.0");
  const auto& down = devs[1].ports.at(0);
  EXPECT_FALSE(down.active());
  EXPECT_EQ(down.state_text, "DOWN");
  EXPECT_EQ(down.phys_state_text, "Disabled");
  EXPECT_NE(describe(devs[0])[0].find("InfiniBand ACTIVE 200 Gb/s lid 0x1a"), std::string::npos);
}

TEST(RdmaCoreDiscoverSysfs, TreeWithoutTopologyStillDescribesPorts) {
  const auto devs = discover_sysfs(SysfsRoot(sysfs_fixture("procfs")));
  ASSERT_EQ(devs.size(), 3u);
  EXPECT_EQ(devs[1].name, "mlx4_0");
  EXPECT_EQ(devs[1].ports.size(), 2u);
  EXPECT_EQ(devs[1].ports[1].link_layer, LinkLayer::kInfiniBand);  // "InfiniBand\n\n"
  EXPECT_EQ(devs[1].ports[1].rate_mbps, 40000u);
  EXPECT_TRUE(devs[2].pci_address.empty());  // no `device` link in this tree
  EXPECT_EQ(devs[2].numa_node, -1);
  EXPECT_EQ(devs[2].node_guid, "0a7f:bc12:45ef:d23b");
}

// Soft-RoCE in the vm tests' guests: rxe devices are virtual (no `device` link), so the PCI function
// and NUMA node are those of the virtio NIC their port's netdev sits on.
TEST(RdmaCoreDiscoverSysfs, RxeOnVirtioTakesItsNetdevsPciFunction) {
  const auto devs = discover_sysfs(SysfsRoot(sysfs_fixture("rxe-virtio")));
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_EQ(devs[0].name, "rxe0");
  EXPECT_EQ(devs[0].ports.at(0).netdev, "eth0");
  EXPECT_EQ(devs[0].ports.at(0).link_layer, LinkLayer::kEthernet);
  EXPECT_EQ(devs[0].ports.at(0).rate_mbps, 2500u);
  EXPECT_EQ(devs[0].ports.at(0).active_mtu_bytes, 1024u) << "netdev MTU 1500";
  EXPECT_EQ(devs[0].pci_address, "0000:00:05.0") << "through eth0 -> virtio2 -> 0000:00:05.0";
  EXPECT_EQ(devs[0].numa_node, 0);
  EXPECT_EQ(devs[0].netdevs, std::vector<std::string>{"eth0"});
  EXPECT_EQ(devs[1].pci_address, "0000:00:06.0");
  EXPECT_EQ(describe(devs[1])[0], "rxe1 port 1: Ethernet ACTIVE 2.5 Gb/s mtu 1024 netdev eth1 pci 0000:00:06.0 numa 0");
}

TEST(RdmaCoreDiscoverSysfs, NoDevicesIsEmpty) {
  EXPECT_TRUE(discover_sysfs(SysfsRoot(sysfs_fixture("does-not-exist"))).empty());
}

}  // namespace
}  // namespace rdmad::verbs::rdma_core
