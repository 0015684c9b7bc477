#include "gid_selector.h"

#include <gtest/gtest.h>

#include "unit/nic_cc/sysfs_fixture.h"

namespace rdmad::verbs::rdma_core {
namespace {

using nic_cc::SysfsRoot;
using rdmad::testing::sysfs_fixture;

constexpr const char* kPf = "enp59s0f0np0";
constexpr const char* kVlan = "enp59s0f0np0.100";

GidEntry entry(uint32_t index, const char* addr, GidType type, const char* ndev) {
  GidEntry e;
  e.index = index;
  e.gid = parse_gid(addr).value();
  e.type = type;
  e.ndev_name = ndev;
  return e;
}

std::vector<GidEntry> cx6_table() {
  return read_gid_table_sysfs(SysfsRoot(sysfs_fixture("roce-cx6dx")), "mlx5_0", 1);
}

GidMatch on_pf(IpFamily family = IpFamily::kIpv4) {
  GidMatch m;
  m.netdev = kPf;
  m.family = family;
  return m;
}

TEST(RdmaCoreGidTable, ReadsSysfsSkippingEmptySlots) {
  const auto t = cx6_table();
  ASSERT_EQ(t.size(), 12u);  // 16 slots, 4 empty
  EXPECT_EQ(t[0].type, GidType::kRoceV1);
  EXPECT_EQ(t[1].type, GidType::kRoceV2);
  EXPECT_EQ(format_gid(t[3].gid), "::ffff:10.10.1.11");
  EXPECT_EQ(t[3].ndev_name, kPf);
  EXPECT_EQ(t[3].ndev_ifindex, 4u);
  EXPECT_EQ(t[9].ndev_name, kVlan);
  EXPECT_EQ(t[9].ndev_ifindex, 6u);
  EXPECT_TRUE(is_ipv4_mapped(t[3].gid));
  EXPECT_TRUE(is_link_local(t[1].gid));
  EXPECT_FALSE(is_link_local(t[5].gid));
}

TEST(RdmaCoreGidTable, InfinibandGidsAreTypeIb) {
  const auto t = read_gid_table_sysfs(SysfsRoot(sysfs_fixture("ib-hdr")), "mlx5_0", 1);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].type, GidType::kIb);
  EXPECT_TRUE(t[0].ndev_name.empty());
  EXPECT_EQ(t[0].ndev_ifindex, 0u);
}

TEST(RdmaCoreGidTable, ParsesSysfsAndShortForms) {
  EXPECT_EQ(parse_gid("0000:0000:0000:0000:0000:ffff:0a0a:010b\n"), parse_gid("::ffff:10.10.1.11"));
  EXPECT_FALSE(parse_gid("not a gid"));
  EXPECT_TRUE(is_zero(parse_gid("::").value()));
}

TEST(RdmaCoreGidSelect, Ipv4FabricPicksTheMappedRoceV2GidOfTheNetdev) {
  const auto t = cx6_table();
  const auto c = select_gid(t, on_pf());
  ASSERT_TRUE(c.ok()) << c.reason;
  EXPECT_EQ(c.entry->index, 3u);
  EXPECT_EQ(c.reason, "gid 3 ::ffff:10.10.1.11 (RoCE v2, enp59s0f0np0)");
}

TEST(RdmaCoreGidSelect, Ipv6FabricPicksTheGlobalIpv6Gid) {
  const auto t = cx6_table();
  const auto c = select_gid(t, on_pf(IpFamily::kIpv6));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.entry->index, 5u);
}

TEST(RdmaCoreGidSelect, VlanGidWithinCidr) {
  const auto t = cx6_table();
  auto m = on_pf();
  m.vlan_netdevs = upper_netdevs(SysfsRoot(sysfs_fixture("roce-cx6dx")), kPf);
  ASSERT_EQ(m.vlan_netdevs, std::vector<std::string>{kVlan});
  m.cidr = GidCidr::parse("192.168.100.0/24");
  const auto c = select_gid(t, m);
  ASSERT_TRUE(c.ok()) << c.reason;
  EXPECT_EQ(c.entry->index, 9u);
}

TEST(RdmaCoreGidSelect, VlanGidsNeedTheVlanToBeAccepted) {
  const auto t = cx6_table();
  auto m = on_pf();
  m.cidr = GidCidr::parse("192.168.100.0/24");
  const auto c = select_gid(t, m);
  EXPECT_FALSE(c.ok());
  EXPECT_NE(c.reason.find("on other netdevs"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("3 outside the cidr"), std::string::npos) << c.reason;
}

// Index chosen on the ConnectX-6 Dx port 0 table for `family` within `cidr`; -1 when none.
int64_t chosen_within(IpFamily family, const char* cidr) {
  auto m = on_pf(family);
  m.cidr = GidCidr::parse(cidr);
  EXPECT_TRUE(m.cidr) << cidr;
  const auto c = select_gid(cx6_table(), m);
  return c.ok() ? int64_t{c.entry->index} : -1;
}

TEST(RdmaCoreGidSelect, CidrPicksASecondaryAddress) {
  EXPECT_EQ(chosen_within(IpFamily::kIpv4, "10.10.9.0/24"), 11);
}

TEST(RdmaCoreGidSelect, Ipv6CidrOnAnIpv6Fabric) {
  EXPECT_EQ(chosen_within(IpFamily::kIpv6, "fd00:10:1::/48"), 5);
}

TEST(RdmaCoreGidSelect, CidrMatchingNothingIsNoChoice) {
  EXPECT_EQ(chosen_within(IpFamily::kIpv4, "172.16.0.0/12"), -1);
}

TEST(RdmaCoreGidSelect, FixedIndexOverridesTheRule) {
  const auto t = cx6_table();
  auto m = on_pf();
  m.gid_index = 1;  // link-local, which the rule would never pick
  const auto c = select_gid(t, m);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.entry->index, 1u);
  EXPECT_NE(c.reason.find("fixed by gid_index"), std::string::npos);
}

TEST(RdmaCoreGidSelect, FixedIndexMissingFromTheTableIsNoChoice) {
  const auto t = cx6_table();
  auto m = on_pf();
  m.gid_index = 13;  // an empty slot
  const auto c = select_gid(t, m);
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.reason, "configured gid_index 13 is not in the GID table");
}

TEST(RdmaCoreGidSelect, LinkLocalOnlyIsNoChoice) {
  const std::vector<GidEntry> t = {entry(0, "fe80::1", GidType::kRoceV1, kPf),
                                   entry(1, "fe80::1", GidType::kRoceV2, kPf)};
  const auto c = select_gid(t, on_pf());
  EXPECT_FALSE(c.ok());
  EXPECT_NE(c.reason.find("1 link-local"), std::string::npos) << c.reason;
}

TEST(RdmaCoreGidSelect, RoceV1IsNeverChosen) {
  const std::vector<GidEntry> t = {entry(0, "::ffff:10.0.0.1", GidType::kRoceV1, kPf),
                                   entry(1, "fd00::1", GidType::kRoceV1, kPf)};
  const auto c = select_gid(t, on_pf());
  EXPECT_FALSE(c.ok());
  EXPECT_NE(c.reason.find("0 RoCE v2 entries"), std::string::npos);
}

TEST(RdmaCoreGidSelect, Ipv4FabricFallsBackToIpv6WhenNoMappedGidExists) {
  const std::vector<GidEntry> t = {entry(0, "fe80::1", GidType::kRoceV2, kPf),
                                   entry(1, "fd00::7", GidType::kRoceV2, kPf)};
  const auto c = select_gid(t, on_pf());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.entry->index, 1u);
  EXPECT_NE(c.reason.find("other family"), std::string::npos);
}

TEST(RdmaCoreGidSelect, ConfiguredNetdevBeatsItsVlanThenLowestIndex) {
  const std::vector<GidEntry> t = {entry(2, "::ffff:192.168.100.11", GidType::kRoceV2, kVlan),
                                   entry(7, "::ffff:10.10.1.12", GidType::kRoceV2, kPf),
                                   entry(5, "::ffff:10.10.1.11", GidType::kRoceV2, kPf)};
  auto m = on_pf();
  m.vlan_netdevs = {kVlan};
  const auto c = select_gid(t, m);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.entry->index, 5u);
}

TEST(RdmaCoreGidSelect, AnyNetdevWhenNoneConfigured) {
  const std::vector<GidEntry> t = {entry(4, "::ffff:10.0.0.9", GidType::kRoceV2, "eth9")};
  EXPECT_EQ(select_gid(t, GidMatch{}).entry->index, 4u);
  EXPECT_FALSE(select_gid(t, on_pf()).ok());
}

TEST(RdmaCoreGidSelect, ReselectsWhenTheTableChanges) {
  auto t = cx6_table();
  ASSERT_EQ(select_gid(t, on_pf()).entry->index, 3u);
  // The address went away: the kernel frees its slots and the choice moves.
  std::erase_if(t, [](const GidEntry& e) { return e.index == 2 || e.index == 3; });
  EXPECT_EQ(select_gid(t, on_pf()).entry->index, 11u);
}

TEST(RdmaCoreGidSelect, SecondPortOfTheDualPortCard) {
  const auto t = read_gid_table_sysfs(SysfsRoot(sysfs_fixture("roce-cx6dx")), "mlx5_1", 1);
  GidMatch m;
  m.netdev = "enp59s0f1np1";
  EXPECT_EQ(select_gid(t, m).entry->index, 3u);
}

TEST(RdmaCoreGidCidr, ParsesAndMatches) {
  const auto v4 = GidCidr::parse("10.10.0.0/20");
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->prefix_len, 116u);
  EXPECT_TRUE(v4->contains(parse_gid("::ffff:10.10.15.255").value()));
  EXPECT_FALSE(v4->contains(parse_gid("::ffff:10.10.16.0").value()));
  EXPECT_FALSE(v4->contains(parse_gid("fd00::1").value()));
  EXPECT_TRUE(GidCidr::parse("0.0.0.0/0")->contains(parse_gid("::ffff:1.2.3.4").value()));
  EXPECT_FALSE(GidCidr::parse("10.0.0.0/33"));
  EXPECT_FALSE(GidCidr::parse("10.0.0.0"));
  EXPECT_FALSE(GidCidr::parse("fd00::/129"));
  EXPECT_FALSE(GidCidr::parse("x/8"));
}

}  // namespace
}  // namespace rdmad::verbs::rdma_core
