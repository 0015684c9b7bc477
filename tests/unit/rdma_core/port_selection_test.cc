// From fixture hosts to the interface's PortInfo, NicCounters and Capabilities.
#include "port_selection.h"

#include <gtest/gtest.h>

#include "device_mapping.h"
#include "split_keys.h"
#include "unit/nic_cc/sysfs_fixture.h"

namespace rdmad::verbs::rdma_core {
namespace {

using nic_cc::SysfsRoot;
using rdmad::testing::sysfs_fixture;

verbs::PortInfo port_of(const std::string& host, const RdmaCoreConfig& config, GidChoice* choice,
                        const std::string& device = "mlx5_0") {
  const SysfsRoot root(sysfs_fixture(host));
  const DeviceInfo d = read_device_sysfs(root, device);
  return port_info_from_sysfs(root, d, d.ports.at(0), config, choice);
}

TEST(RdmaCorePortInfo, RoceHostDefaultsToTheIpv4GidOfThePortsNetdev) {
  GidChoice choice;
  const auto p = port_of("roce-cx6dx", RdmaCoreConfig{}, &choice);
  ASSERT_TRUE(choice.ok()) << choice.reason;
  EXPECT_EQ(choice.entry->index, 3u);
  EXPECT_EQ(p.gid.to_ip_string(), "10.10.1.11");
  EXPECT_EQ(p.port_num, 1);
  EXPECT_EQ(p.state, PortState::kActive);
  EXPECT_EQ(p.link_layer, verbs::LinkLayer::kEthernet);
  EXPECT_EQ(p.speed_mbps, 100000u);
  EXPECT_EQ(p.active_mtu_bytes, 4096u) << "netdev MTU 9000";
}

TEST(RdmaCorePortInfo, ConfigPicksVlanByCidrIpv6OrFixedIndex) {
  GidChoice choice;
  RdmaCoreConfig c;
  c.gid_cidr = "192.168.100.0/24";
  port_of("roce-cx6dx", c, &choice);
  ASSERT_TRUE(choice.ok()) << choice.reason;
  EXPECT_EQ(choice.entry->index, 9u) << "the VLAN on the port's netdev is accepted";
  c = RdmaCoreConfig{};
  c.gid_ipv6 = true;
  port_of("roce-cx6dx", c, &choice);
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice.entry->index, 5u);
  c = RdmaCoreConfig{};
  c.gid_index = 1;
  port_of("roce-cx6dx", c, &choice);
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice.entry->index, 1u);
}

TEST(RdmaCorePortInfo, BadCidrOrWrongNetdevGivesNoGid) {
  GidChoice choice;
  RdmaCoreConfig c;
  c.gid_cidr = "10.0.0.0/99";
  const auto p = port_of("roce-cx6dx", c, &choice);
  EXPECT_FALSE(choice.ok());
  EXPECT_NE(choice.reason.find("gid_cidr"), std::string::npos);
  EXPECT_EQ(p.gid, Gid{});
  c = RdmaCoreConfig{};
  c.gid_netdev = "eth9";
  port_of("roce-cx6dx", c, &choice);
  EXPECT_FALSE(choice.ok()) << "no GID of mlx5_0 is on eth9";
}

TEST(RdmaCorePortInfo, InfinibandHostUsesThePortGid) {
  GidChoice choice;
  const auto p = port_of("ib-hdr", RdmaCoreConfig{}, &choice);
  ASSERT_TRUE(choice.ok()) << choice.reason;
  EXPECT_EQ(choice.entry->index, 0u);
  EXPECT_EQ(format_gid(p.gid.raw), "fe80::b83f:d203:12:3450");
  EXPECT_EQ(p.link_layer, verbs::LinkLayer::kInfiniband);
  EXPECT_EQ(p.state, PortState::kActive);
  EXPECT_EQ(p.speed_mbps, 200000u);
  const auto down = port_of("ib-hdr", RdmaCoreConfig{}, &choice, "mlx5_1");
  EXPECT_EQ(down.state, PortState::kDown);
}

TEST(RdmaCorePortInfo, IbvQueryPortOverridesStateAndMtus) {
  GidChoice choice;
  auto p = port_of("roce-cx6dx", RdmaCoreConfig{}, &choice);
  ibv_port_attr attr{};
  attr.state = IBV_PORT_INIT;
  attr.link_layer = IBV_LINK_LAYER_ETHERNET;
  attr.max_mtu = IBV_MTU_4096;
  attr.active_mtu = IBV_MTU_1024;
  apply_port_attr(attr, p);
  EXPECT_EQ(p.state, PortState::kInit);
  EXPECT_EQ(p.active_mtu_bytes, 1024u);
  EXPECT_EQ(p.max_mtu_bytes, 4096u);
  EXPECT_EQ(p.gid.to_ip_string(), "10.10.1.11") << "the GID stays the selected one";
}

TEST(RdmaCorePortInfo, InfinibandPortReportsItsLidForPeers) {
  GidChoice choice;
  auto p = port_of("ib-hdr", RdmaCoreConfig{}, &choice);
  ibv_port_attr attr{};
  attr.state = IBV_PORT_ACTIVE;
  attr.link_layer = IBV_LINK_LAYER_INFINIBAND;
  attr.lid = 0x2a;
  apply_port_attr(attr, p);
  EXPECT_EQ(p.lid, 0x2a) << "a peer connects with QpAttr::dest_lid = this LID";
  attr.link_layer = IBV_LINK_LAYER_ETHERNET;
  verbs::PortInfo roce;
  apply_port_attr(attr, roce);
  EXPECT_EQ(roce.lid, 0) << "RoCE ports have no LID";
}

TEST(RdmaCoreNicCounters, MapsPortAndHwCountersWithByteUnits) {
  const SysfsRoot root(sysfs_fixture("roce-cx6dx"));
  const auto port = nic_cc::read_port_counters(root, "mlx5_0", 1);
  const auto hw = nic_cc::read_hw_counters(root, "mlx5_0", 1);
  ASSERT_TRUE(port);
  ASSERT_TRUE(hw);
  const NicCounters c = to_nic_counters(&port.value(), &hw.value());
  EXPECT_EQ(c.tx_bytes, 3530287420123ULL * 4) << "port_xmit_data counts 4-byte words";
  EXPECT_EQ(c.rx_bytes, 2201188776ULL * 4);
  EXPECT_EQ(c.tx_packets, 5811720381u);
  EXPECT_EQ(c.rx_packets, 901231177u);
  EXPECT_EQ(c.np_ecn_marked_roce_packets, 120990u);
  EXPECT_EQ(c.np_cnp_sent, 120554u);
  EXPECT_EQ(c.rp_cnp_handled, 98812u);
  EXPECT_EQ(c.rp_cnp_ignored, 0u);
  EXPECT_EQ(c.out_of_sequence, 3u);
  EXPECT_EQ(c.packet_seq_err, 1u);
  EXPECT_EQ(c.local_ack_timeout_err, 2u);
  // A driver without hw_counters (the InfiniBand host) still gives the port's traffic.
  const SysfsRoot ib(sysfs_fixture("ib-hdr"));
  const auto ib_port = nic_cc::read_port_counters(ib, "mlx5_0", 1);
  ASSERT_TRUE(ib_port);
  const NicCounters i = to_nic_counters(&ib_port.value(), nullptr);
  EXPECT_EQ(i.tx_bytes, ib_port->xmit_bytes);
  EXPECT_EQ(i.np_cnp_sent, 0u);
  EXPECT_EQ(to_nic_counters(nullptr, nullptr).tx_bytes, 0u);
}

// rxe (Soft-RoCE) has its own hw_counters names and no counters/ directory (no MAD interface);
// the counters that mean the same stand in, the rest stay 0 (docs/verbs.md, "rxe findings").
TEST(RdmaCoreNicCounters, RxeCountersStandInForTheMlx5NamesTheyMatch) {
  nic_cc::HwCounters rxe;
  rxe.values = {{"sent_pkts", 120}, {"rcvd_pkts", 110}, {"duplicate_request", 2}, {"out_of_seq_request", 5},
                {"rcvd_rnr_err", 3}, {"send_rnr_err", 9}, {"rcvd_seq_err", 4}, {"completer_retry_err", 7},
                {"retry_exceeded_err", 1}, {"retry_rnr_exceeded_err", 1}};
  const NicCounters c = to_nic_counters(nullptr, &rxe);
  EXPECT_EQ(c.tx_packets, 120u);
  EXPECT_EQ(c.rx_packets, 110u);
  EXPECT_EQ(c.duplicate_request, 2u);
  EXPECT_EQ(c.out_of_sequence, 5u);
  EXPECT_EQ(c.rnr_nak_retry_err, 3u) << "RNR NAKs received";
  EXPECT_EQ(c.packet_seq_err, 4u) << "sequence NAKs received";
  EXPECT_EQ(c.local_ack_timeout_err, 0u) << "completer_retry_err counts sequence-NAK restarts too";
  EXPECT_EQ(c.req_remote_access_errors, 0u);
  // Where the mlx5 name is there, it is the one read.
  rxe.values["rnr_nak_retry_err"] = 30;
  EXPECT_EQ(to_nic_counters(nullptr, &rxe).rnr_nak_retry_err, 30u);
}

// rxe has no counters/ and names its driver counters its own way: packets and sequence errors
// still reach NicCounters (rdmactl nics), the rest stays a driver counter.
TEST(RdmaCoreNicCounters, RxeCountersUnderTheirOwnNames) {
  const SysfsRoot root(sysfs_fixture("rxe-virtio"));
  EXPECT_FALSE(nic_cc::read_port_counters(root, "rxe0", 1)) << "no PMA counters on rxe";
  const auto hw = nic_cc::read_hw_counters(root, "rxe0", 1);
  ASSERT_TRUE(hw);
  const NicCounters c = to_nic_counters(nullptr, &hw.value());
  EXPECT_EQ(c.tx_packets, 1905u) << "sent_pkts";
  EXPECT_EQ(c.rx_packets, 2862u) << "rcvd_pkts";
  EXPECT_EQ(c.out_of_sequence, 2u) << "out_of_seq_request";
  EXPECT_EQ(c.packet_seq_err, 3u) << "rcvd_seq_err";
  EXPECT_EQ(c.duplicate_request, 1u);
  EXPECT_EQ(c.tx_bytes, 0u) << "rxe counts no bytes";
  EXPECT_EQ(c.retransmitted_packets, 0u) << "completer_retry_err counts retries, not packets";
}

TEST(RdmaCoreCapabilities, AdvertiseWhatTheProbesFound) {
  DeviceCaps caps;
  caps.max_mr_size = ~0ULL;
  caps.max_qp = 131072;
  caps.max_qp_wr = 32768;
  caps.max_cqe = 4194303;
  caps.dmabuf = classify_dmabuf_probe(false, EBADF);
  Capabilities c = to_capabilities(caps, 1u << 30);
  EXPECT_TRUE(c.dmabuf_mr) << "EBADF on fd -1 means the path is there";
  EXPECT_FALSE(c.software_cc);
  EXPECT_EQ(c.max_mr_size, kMaxSlices * kMaxMrSliceBytes) << "one handle covers kMaxSlices slices";
  EXPECT_EQ(c.max_qp, 131072u);
  EXPECT_EQ(c.max_qp_wr, 32768u);
  EXPECT_EQ(c.max_cq_depth, 4194303u);
  EXPECT_EQ(c.max_msg_size, 1u << 30);
  caps.dmabuf = classify_dmabuf_probe(false, EOPNOTSUPP);
  caps.max_mr_size = 1ULL << 30;  // a device that cannot take a 3.5 GiB slice
  c = to_capabilities(caps, 1u << 30);
  EXPECT_FALSE(c.dmabuf_mr);
  EXPECT_EQ(c.max_mr_size, 1ULL << 30);
}

}  // namespace
}  // namespace rdmad::verbs::rdma_core
