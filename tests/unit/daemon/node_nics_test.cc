// NodeNics: the one owner of the node's NICs. Its slots keep [[nic]] order whether or not a NIC
// opened; the client service's NicDirectory view lists every slot, an out-of-service one link
// down, with the PCI address and NUMA node of its device's hardware port; flow_nics() hands the
// flow engine every slot in the same order, an out-of-service one without a device.
#include "rdmad/daemon/nics/node_nics.h"

#include <gtest/gtest.h>

#include "rdmad/base/log.h"
#include "support/doubles/nic_backends.h"
#include "support/temp_dir.h"

namespace rdmad::daemon {
namespace {

using test::rdma_nic;

verbs::HostNic host_port(const std::string& device, const std::string& pci, int numa) {
  verbs::HostNic p;
  p.device = device;
  p.pci = pci;
  p.numa = numa;
  return p;
}

class NodeNicsTest : public ::testing::Test {
 protected:
  NodeNicsTest() {
    log::setup(spdlog::level::off);
    backends.host_ports = {host_port("mlx5_0", "0000:17:00.0", 1), host_port("mlx5_1", "0000:3b:00.0", 0)};
    backends.present = {"mlx5_0"};  // mlx5_1 is not there yet
    config.daemon.sysfs_root = sysfs.path();  // an empty tree: no counters, no CC knobs
    config.nics = {rdma_nic("rail0", "mlx5_0"), rdma_nic("rail1", "mlx5_1")};
    config.nics[1].advertise_address = "192.0.2.7";
    config.nics[1].advertise_udp_port = 14791;
  }

  ::rdmad::test::TempDir sysfs;
  test::NicBackends backends;
  config::Config config;
};

TEST_F(NodeNicsTest, SlotsKeepFileOrderAndAnOutOfServiceNicKeepsItsIndex) {
  NodeNics nics(backends.registry, config);
  const base::Status opened = nics.open();
  ASSERT_TRUE(opened.ok()) << opened.message();
  ASSERT_EQ(nics.slots().nics().size(), 2u);
  EXPECT_TRUE(nics.slots().nics()[0].in_service());
  EXPECT_FALSE(nics.slots().nics()[1].in_service());
  EXPECT_NE(nics.diagnosis().find("warn nic rail1: out of service (device mlx5_1)"), std::string::npos)
      << nics.diagnosis();
  EXPECT_EQ(nics.slots().find("rail1"), &nics.slots().nics()[1]);
  EXPECT_EQ(nics.slots().find("rail9"), nullptr);

  backends.present.insert("mlx5_1");
  EXPECT_EQ(nics.retry(NodeNics::Clock::now()), std::vector<size_t>{1}) << "the retry opens it in its slot";
  EXPECT_TRUE(nics.slots().nics()[1].in_service());
  EXPECT_EQ(nics.diagnosis().find("out of service"), std::string::npos) << nics.diagnosis();
}

TEST_F(NodeNicsTest, TheDirectoryListsEverySlotWithItsHardwarePort) {
  NodeNics nics(backends.registry, config);
  ASSERT_TRUE(nics.open().ok());
  const clients::NicDirectory& directory = nics;
  EXPECT_EQ(directory.count(), 2u);
  const std::vector<clients::NicDescriptor> list = directory.nics();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].name, "rail0");
  EXPECT_EQ(list[0].backend, "rdma_core");
  EXPECT_EQ(list[0].pci_address, "0000:17:00.0");
  EXPECT_EQ(list[0].numa_node, 1);
  EXPECT_EQ(list[0].link_state, RDMAD_LINK_DOWN) << "the stub's port is down";
  EXPECT_EQ(list[1].name, "rail1");
  EXPECT_EQ(list[1].link_state, RDMAD_LINK_DOWN) << "out of service: listed, link down";
  EXPECT_EQ(list[1].pci_address, "0000:3b:00.0") << "the kernel's facts hold without an open device";
  EXPECT_EQ(list[1].numa_node, 0);

  ASSERT_NE(nics.host_port("mlx5_1", 1), nullptr);
  EXPECT_EQ(nics.host_port("mlx5_1", 1)->pci, "0000:3b:00.0");
  EXPECT_EQ(nics.host_port("mlx5_1", 2), nullptr);
}

TEST_F(NodeNicsTest, FlowNicsFollowTheSlotsAndAnOutOfServiceOneHasNoDevice) {
  NodeNics nics(backends.registry, config);
  ASSERT_TRUE(nics.open().ok());
  const std::vector<FlowNic> flow = nics.flow_nics();
  ASSERT_EQ(flow.size(), 2u);
  EXPECT_EQ(flow[0].name, "rail0");
  EXPECT_EQ(flow[0].device, "mlx5_0");
  EXPECT_EQ(flow[0].device_ptr, nics.slots().nics()[0].device.get());
  EXPECT_FALSE(flow[0].advertise_gid.has_value());
  EXPECT_EQ(flow[1].name, "rail1");
  EXPECT_EQ(flow[1].device, "mlx5_1") << "the configured device names it while out of service";
  EXPECT_EQ(flow[1].device_ptr, nullptr);
  ASSERT_TRUE(flow[1].advertise_gid.has_value());
  EXPECT_EQ(flow[1].advertise_gid->to_ip_string(), "192.0.2.7");
  EXPECT_EQ(flow[1].advertise_udp_port, 14791);
}

TEST_F(NodeNicsTest, ASoftNicThatCannotOpenIsAStartupError) {
  config::NicSection soft;
  soft.name = "soft0";
  soft.backend = "soft";
  soft.address = "192.0.2.1";
  config.nics.push_back(soft);
  NodeNics nics(backends.registry, config);
  const base::Status opened = nics.open();
  EXPECT_FALSE(opened.ok());
  EXPECT_EQ(opened.message(), "nic soft0: cannot open with backend soft: address not local");
}

}  // namespace
}  // namespace rdmad::daemon
