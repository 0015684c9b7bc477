// HardwareNics against fixture sysfs trees shaped like real hosts (tests/data/sysfs/).
#include "rdmad/daemon/nics/hardware_nics.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include "rdmad/config/loader.h"
#include "rdmad/base/log.h"
#include "support/temp_dir.h"

namespace rdmad::daemon {
namespace {

namespace fs = std::filesystem;
const fs::path kTrees = fs::path(RDMAD_SOURCE_DIR) / "tests/data/sysfs";

// The backends the daemon has: the rdma_core one finds the fixture's devices in sysfs.
const verbs::BackendRegistry& backends() {
  static const verbs::BackendRegistry r = [] {
    verbs::BackendRegistry reg;
    verbs::register_builtin_backends(reg);
    return reg;
  }();
  return r;
}

config::Config load(const std::string& toml) {
  auto r = config::load_string(toml, "test.toml");
  EXPECT_TRUE(r.ok()) << (r.errors.empty() ? "" : r.errors[0].to_string());
  return r.config;
}

std::string scrape(const HardwareNics& hw) {
  return prometheus::TextSerializer().Serialize(hw.collector()->Collect());
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

// Copies a fixture tree (keeping its symlinks) so a test may write to it.
fs::path copy_tree(const std::string& tree, const test::TempDir& dir) {
  const fs::path dst = fs::path(dir.path()) / tree;
  fs::copy(kTrees / tree, dst, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  return dst;
}

class HardwareNicsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { log::setup(spdlog::level::warn); }
};

TEST_F(HardwareNicsTest, ConfiguredDeviceIsFoundInSysfsAndExported) {
  const auto cfg = load("[[nic]]\nname = \"rail0\"\ndevice = \"mlx5_0\"\n");
  HardwareNics hw(backends(), nic_cc::SysfsRoot(kTrees / "roce-vendor-ecn"), cfg);
  hw.start();
  ASSERT_EQ(hw.ports().size(), 1u);
  EXPECT_EQ(hw.ports()[0].device, "mlx5_0");
  const std::string text = scrape(hw);
  EXPECT_NE(text.find("rdmad_nic_info{device=\"mlx5_0\",port=\"1\",backend=\"rdma_core\",link_layer=\"Ethernet\",nic=\"rail0\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rdmad_state_id{device=\"mlx5_0\",port=\"1\"} 4"), std::string::npos) << text;
  // The vendor tree's knobs are reported as in force.
  EXPECT_NE(text.find("rpg_time_reset=\"300\""), std::string::npos) << text;
  EXPECT_NE(text.find("rdmad_rp_cnp_ignored_packets_received_total{device=\"mlx5_0\",port=\"1\"}"), std::string::npos);
}

TEST_F(HardwareNicsTest, PortCountersAreBytesNotWords) {
  const auto cfg = load("[[nic]]\nname = \"n\"\ndevice = \"mlx5_0\"\n");
  HardwareNics hw(backends(), nic_cc::SysfsRoot(kTrees / "procfs"), cfg);
  hw.start();
  const std::string text = scrape(hw);
  // procfs fixture: port_xmit_data 2880761508848 words -> 11523046035392 bytes.
  EXPECT_NE(text.find("rdmad_port_data_transmitted_bytes_total{device=\"mlx5_0\",port=\"1\"} 11523046035392"),
            std::string::npos)
      << text;
}

TEST_F(HardwareNicsTest, CcDisabledOnTheRocePriorityIsAFindingAndAMetric) {
  // The vendor fixture has RP and NP switched off on priority 5.
  const auto cfg = load("[[nic]]\nname = \"rail0\"\ndevice = \"mlx5_0\"\nroce_priority = 5\n");
  HardwareNics hw(backends(), nic_cc::SysfsRoot(kTrees / "roce-vendor-ecn"), cfg);
  hw.start();
  hw.poll();
  const auto f = hw.findings_for_test();
  EXPECT_NE(std::find(f.begin(), f.end(), "mlx5_0/1/cc_disabled_on_priority"), f.end());
  const std::string text = scrape(hw);
  EXPECT_NE(text.find("rdmad_cc_misconfigured{device=\"mlx5_0\",port=\"1\",reason=\"cc_disabled_on_priority\"} 1"),
            std::string::npos)
      << text;
  // Priority 3 is enabled: no finding.
  HardwareNics ok(backends(), nic_cc::SysfsRoot(kTrees / "roce-vendor-ecn"),
                  load("[[nic]]\nname = \"rail0\"\ndevice = \"mlx5_0\"\nroce_priority = 3\n"));
  ok.start();
  ok.poll();
  EXPECT_TRUE(ok.findings_for_test().empty());
}

TEST_F(HardwareNicsTest, RisingCnpIgnoredIsDetectedBetweenPolls) {
  test::TempDir dir;
  const fs::path root = copy_tree("roce-vendor-ecn", dir);
  HardwareNics hw(backends(), nic_cc::SysfsRoot(root), load("[[nic]]\nname = \"rail0\"\ndevice = \"mlx5_0\"\n"));
  hw.start();
  hw.poll();
  EXPECT_TRUE(hw.findings_for_test().empty());
  const fs::path ignored = root / "sys/class/infiniband/mlx5_0/ports/1/hw_counters/rp_cnp_ignored";
  const uint64_t before = std::stoull(read(fs::canonical(ignored)));
  std::ofstream(fs::canonical(ignored), std::ios::trunc) << before + 100 << "\n";
  hw.poll();
  const auto f = hw.findings_for_test();
  EXPECT_NE(std::find(f.begin(), f.end(), "mlx5_0/1/cnp_ignored"), f.end());
  hw.poll();  // no longer rising: cleared
  EXPECT_TRUE(hw.findings_for_test().empty());
}

TEST_F(HardwareNicsTest, CcApplyWritesTheProfileAndReportsWhatIsInForce) {
  test::TempDir dir;
  const fs::path root = copy_tree("roce-vendor-ecn", dir);
  HardwareNics hw(backends(), nic_cc::SysfsRoot(root),
                  load("[cc]\nprofile = \"mlx5\"\nrpg_time_reset = 55\nrpg_ai_rate = 40\n"
                       "[[nic]]\nname = \"rail0\"\ndevice = \"mlx5_0\"\ncc_apply = true\n"));
  hw.start();
  const fs::path rp = root / "sys/class/net/eth0/ecn/roce_rp";
  EXPECT_EQ(read(fs::canonical(rp / "rpg_time_reset")), "55");
  EXPECT_EQ(read(fs::canonical(rp / "rpg_ai_rate")), "40");
  EXPECT_EQ(read(fs::canonical(rp / "dce_tcp_g")), "1019");  // unchanged: already the profile's value
  EXPECT_NE(scrape(hw).find("rpg_time_reset=\"55\""), std::string::npos);
}

TEST_F(HardwareNicsTest, WithoutCcApplyNothingIsWritten) {
  test::TempDir dir;
  const fs::path root = copy_tree("roce-vendor-ecn", dir);
  HardwareNics hw(backends(), nic_cc::SysfsRoot(root),
                  load("[cc]\nrpg_time_reset = 55\n[[nic]]\nname = \"rail0\"\ndevice = \"mlx5_0\"\n"));
  hw.start();
  EXPECT_EQ(read(fs::canonical(root / "sys/class/net/eth0/ecn/roce_rp/rpg_time_reset")), "300");
}

// rxe (the vm tests' guests): its driver counters are exported as they are, its packet counts under
// the port series (it has no counters/), and its PCI function is the virtio NIC's.
TEST_F(HardwareNicsTest, RxeDriverCountersAndPacketsAreExported) {
  const auto cfg = load("[[nic]]\nname = \"rail0\"\ndevice = \"rxe0\"\n");
  HardwareNics hw(backends(), nic_cc::SysfsRoot(kTrees / "rxe-virtio"), cfg);
  hw.start();
  ASSERT_EQ(hw.ports().size(), 1u) << "the configured one (libibverbs lists none on this host)";
  EXPECT_EQ(hw.ports()[0].pci, "0000:00:05.0");
  const std::string text = scrape(hw);
  EXPECT_NE(text.find("rdmad_hw_counter_total{device=\"rxe0\",port=\"1\",counter=\"rcvd_pkts\"} 2862"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rdmad_hw_counter_total{device=\"rxe0\",port=\"1\",counter=\"completer_retry_err\"} 7"),
            std::string::npos);
  EXPECT_EQ(text.find("counter=\"lifespan\""), std::string::npos) << "a setting, not a counter";
  EXPECT_NE(text.find("rdmad_port_packets_received_total{device=\"rxe0\",port=\"1\"} 2862"), std::string::npos);
  EXPECT_NE(text.find("rdmad_port_packets_transmitted_total{device=\"rxe0\",port=\"1\"} 1905"), std::string::npos);
  EXPECT_EQ(text.find("rdmad_port_data_transmitted_bytes_total{device=\"rxe0\""), std::string::npos)
      << "rxe counts no bytes: no series rather than a zero";
}

TEST_F(HardwareNicsTest, NoDevicesIsANormalState) {
  test::TempDir dir;
  HardwareNics hw(backends(), nic_cc::SysfsRoot(dir.path()), load(""));
  hw.start();
  hw.poll();
  EXPECT_TRUE(hw.ports().empty());
  EXPECT_EQ(scrape(hw), "");
}

// rdmactl gids: every port's GID table as sysfs has it when asked (GIDs follow the addresses).
TEST_F(HardwareNicsTest, GidTablesAreReadFromSysfsWhenAsked) {
  test::TempDir dir;
  const fs::path root = copy_tree("roce-vendor-ecn", dir);
  const auto cfg = load("[[nic]]\nname = \"rail0\"\ndevice = \"mlx5_0\"\n");
  HardwareNics hw(backends(), nic_cc::SysfsRoot(root), cfg);
  hw.start();
  EXPECT_TRUE(hw.ports()[0].gids.empty()) << "discovery at start-up does not read GID tables";
  auto tables = hw.gid_tables();
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_EQ(tables[0].device, "mlx5_0");
  EXPECT_EQ(tables[0].port, 1u);
  const auto& gids = tables[0].gids;
  ASSERT_EQ(gids.size(), 4u) << "the empty slots are left out";
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(gids[i].index, i);
    EXPECT_EQ(gids[i].netdev, "eth0");
  }
  // "IB/RoCE v1" on an Ethernet port is RoCE v1.
  EXPECT_EQ(gids[0].type, "RoCE v1");
  EXPECT_EQ(gids[1].type, "RoCE v2");
  EXPECT_EQ(gids[3].type, "RoCE v2");
  const std::array<uint8_t, 16> v4 = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 172, 16, 5, 3};
  EXPECT_EQ(gids[3].gid, v4);
  EXPECT_EQ(gids[0].gid[0], 0xfe);

  // An address added on the netdev shows up at the next read.
  const fs::path port = fs::canonical(root / "sys/class/infiniband/mlx5_0") / "ports/1";
  std::ofstream(port / "gids/4") << "0000:0000:0000:0000:0000:ffff:0a00:0009\n";
  std::ofstream(port / "gid_attrs/types/4") << "RoCE v2\n";
  std::ofstream(port / "gid_attrs/ndevs/4") << "eth0\n";
  tables = hw.gid_tables();
  ASSERT_EQ(tables.size(), 1u);
  ASSERT_EQ(tables[0].gids.size(), 5u);
  EXPECT_EQ(tables[0].gids[4].index, 4u);
  EXPECT_EQ(tables[0].gids[4].gid[15], 9);
}

}  // namespace
}  // namespace rdmad::daemon
