// ARP and IPv6 neighbour discovery of the dpdk backend, without DPDK: two resolvers resolve each
// other through the frames they write; requests for our address are answered to the letter (RFC
// 826, RFC 4861), anything else is not; requests for an unresolved peer back off on a manual
// clock; static neighbours never move.
#include <gtest/gtest.h>

#include <vector>

#include "neighbors.h"

namespace rdmad::verbs::dpdk {
namespace {

constexpr MacAddr kMacA = {0x02, 0, 0, 0, 0, 0x0a};
constexpr MacAddr kMacB = {0x02, 0, 0, 0, 0, 0x0b};

struct Side {
  LinkAddress local;
  NeighborTable table;
  NeighborResolver resolver{local, table};
  Side(const MacAddr& mac, const char* ip) : local{mac, *parse_ip(ip), 4791} {}
};

std::vector<uint8_t> frame_of(const uint8_t* buf, size_t n) { return {buf, buf + n}; }

uint16_t icmpv6_sum(const std::vector<uint8_t>& f) {
  InetChecksum c;
  c.add({f.data() + 22, 32});
  const uint16_t len = load_be16(f.data() + 18);
  c.add16(len);
  c.add16(kIpProtoIcmpv6);
  c.add({f.data() + 54, len});
  return c.value();
}

TEST(Arp, TwoSidesResolveEachOther) {
  Side a(kMacA, "10.2.0.1"), b(kMacB, "10.2.0.2");
  NeighborTable::Entry* to_b = a.table.add(b.local.ip);
  ASSERT_NE(to_b, nullptr);
  EXPECT_FALSE(NeighborTable::mac_of(*to_b));
  uint8_t buf[kMaxControlFrameBytes];
  const size_t n = a.resolver.request(*to_b, 1'000, buf);
  ASSERT_EQ(n, kMinFrameBytes) << "an ARP request, padded to Ethernet's minimum";
  const std::vector<uint8_t> request = frame_of(buf, n);
  EXPECT_EQ(classify_frame(request, b.local).kind, FrameKind::kArp);
  EXPECT_TRUE(std::equal(kBroadcastMac.begin(), kBroadcastMac.end(), request.begin()));
  EXPECT_EQ(load_be16(request.data() + 14 + 6), 1) << "a request";

  uint8_t out[kMaxControlFrameBytes];
  const size_t r = b.resolver.on_frame(request, out);
  ASSERT_EQ(r, kMinFrameBytes);
  const std::vector<uint8_t> reply = frame_of(out, r);
  EXPECT_TRUE(std::equal(kMacA.begin(), kMacA.end(), reply.begin())) << "sent to the asker";
  EXPECT_TRUE(std::equal(kMacB.begin(), kMacB.end(), reply.begin() + 6));
  const uint8_t* arp = reply.data() + 14;
  EXPECT_EQ(load_be16(arp), 1);
  EXPECT_EQ(load_be16(arp + 2), kEtherTypeIpv4);
  EXPECT_EQ(load_be16(arp + 6), 2) << "a reply";
  EXPECT_TRUE(std::equal(kMacB.begin(), kMacB.end(), arp + 8)) << "sender: b";
  EXPECT_TRUE(std::equal(b.local.ip.bytes.begin(), b.local.ip.bytes.begin() + 4, arp + 14));
  EXPECT_TRUE(std::equal(kMacA.begin(), kMacA.end(), arp + 18)) << "target: a";
  EXPECT_TRUE(std::equal(a.local.ip.bytes.begin(), a.local.ip.bytes.begin() + 4, arp + 24));
  EXPECT_EQ(b.table.size(), 0u) << "b learns nothing it did not ask for";

  EXPECT_EQ(classify_frame(reply, a.local).kind, FrameKind::kArp);
  EXPECT_EQ(a.resolver.on_frame(reply, out), 0u) << "a reply is not answered";
  ASSERT_TRUE(NeighborTable::mac_of(*to_b));
  EXPECT_EQ(*NeighborTable::mac_of(*to_b), kMacB);
  EXPECT_EQ(a.resolver.request(*to_b, 1'000'000'000'000, buf), 0u) << "resolved: no more requests";
}

TEST(Arp, RequestsForOthersAreNotAnsweredAndStrangersNotLearned) {
  Side a(kMacA, "10.2.0.1"), b(kMacB, "10.2.0.2"), c({0x02, 0, 0, 0, 0, 0x0c}, "10.2.0.3");
  NeighborTable::Entry* to_c = a.table.add(c.local.ip);
  uint8_t buf[kMaxControlFrameBytes], out[kMaxControlFrameBytes];
  const size_t n = a.resolver.request(*to_c, 0, buf);
  ASSERT_GT(n, 0u);
  EXPECT_EQ(b.resolver.on_frame(frame_of(buf, n), out), 0u) << "b is not 10.2.0.3";
  // c answers; b overhears a request from a and learns nothing (no entry of its own for a).
  EXPECT_GT(c.resolver.on_frame(frame_of(buf, n), out), 0u);
  EXPECT_EQ(b.table.find(a.local.ip), nullptr);
  // b has a path to a: a's request (a broadcast) refreshes b's entry for a, as RFC 826 merges.
  NeighborTable::Entry* b_to_a = b.table.add(a.local.ip);
  b.resolver.on_frame(frame_of(buf, n), out);
  ASSERT_TRUE(NeighborTable::mac_of(*b_to_a));
  EXPECT_EQ(*NeighborTable::mac_of(*b_to_a), kMacA);
}

TEST(Arp, RequestsBackOffUntilAnswered) {
  Side a(kMacA, "10.2.0.1");
  NeighborTable::Entry* e = a.table.add(*parse_ip("10.2.0.9"));
  uint8_t buf[kMaxControlFrameBytes];
  int64_t now = 5'000'000;
  EXPECT_GT(a.resolver.request(*e, now, buf), 0u) << "the first leaves at once";
  EXPECT_EQ(a.resolver.request(*e, now, buf), 0u);
  // A request the port refused (its link still coming up) is as if never sent.
  NeighborResolver::request_lost(*e);
  EXPECT_GT(a.resolver.request(*e, now, buf), 0u) << "a lost request is sent again at once";
  std::vector<int64_t> waits;
  for (int i = 0; i < 16; ++i) {
    int64_t wait = 1;
    while (a.resolver.request(*e, now + wait, buf) == 0) wait += 500'000;
    waits.push_back(wait);
    now += wait;
  }
  // Quick retries at the first interval, then doubling to the cap (in steps of 0.5 ms here).
  for (uint32_t i = 0; i < kQuickRetries; ++i) EXPECT_EQ(waits[i], kFirstRetryNs + 1) << i;
  EXPECT_EQ(waits[kQuickRetries], 2 * kFirstRetryNs + 1);
  EXPECT_EQ(waits[kQuickRetries + 1], 4 * kFirstRetryNs + 1);
  EXPECT_EQ(waits.back(), kMaxRetryNs + 1) << "capped";
  EXPECT_EQ(e->requests.load(), 17u);
}

TEST(Arp, StaticNeighborsStayWhatTheOptionSays) {
  Side a(kMacA, "10.2.0.1"), b(kMacB, "10.2.0.2");
  const MacAddr configured = {0x02, 0, 0, 0, 0, 0xcc};
  ASSERT_TRUE(a.table.add_static(b.local.ip, configured).ok());
  EXPECT_FALSE(a.table.add_static(b.local.ip, configured).ok()) << "twice";
  NeighborTable::Entry* e = a.table.find(b.local.ip);
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->fixed);
  uint8_t buf[kMaxControlFrameBytes], out[kMaxControlFrameBytes];
  EXPECT_EQ(a.resolver.request(*e, 0, buf), 0u) << "nothing to resolve";
  // b asks for a: a answers and would merge b's MAC, but the static entry wins.
  NeighborTable::Entry* b_to_a = b.table.add(a.local.ip);
  const size_t n = b.resolver.request(*b_to_a, 0, buf);
  EXPECT_GT(a.resolver.on_frame(frame_of(buf, n), out), 0u);
  EXPECT_EQ(*NeighborTable::mac_of(*e), configured);
}

TEST(NeighborDiscovery, TwoSidesResolveEachOther) {
  Side a(kMacA, "fd00::1:a"), b(kMacB, "fd00::2:b");
  NeighborTable::Entry* to_b = a.table.add(b.local.ip);
  uint8_t buf[kMaxControlFrameBytes];
  const size_t n = a.resolver.request(*to_b, 0, buf);
  ASSERT_EQ(n, 86u) << "a neighbour solicitation with a source link-layer address";
  const std::vector<uint8_t> ns = frame_of(buf, n);
  const MacAddr group_mac = {0x33, 0x33, 0xff, 0x02, 0x00, 0x0b};
  EXPECT_TRUE(std::equal(group_mac.begin(), group_mac.end(), ns.begin())) << "to b's solicited-node group";
  const roce::IpAddr group = solicited_node(b.local.ip);
  EXPECT_TRUE(std::equal(group.bytes.begin(), group.bytes.end(), ns.begin() + 38));
  EXPECT_EQ(ns[21], 255) << "hop limit";
  EXPECT_EQ(ns[54], 135);
  EXPECT_EQ(icmpv6_sum(ns), 0) << "the ICMPv6 checksum holds";
  EXPECT_EQ(classify_frame(ns, b.local).kind, FrameKind::kNeighborDiscovery);

  uint8_t out[kMaxControlFrameBytes];
  const size_t r = b.resolver.on_frame(ns, out);
  ASSERT_EQ(r, 86u);
  const std::vector<uint8_t> na = frame_of(out, r);
  EXPECT_TRUE(std::equal(kMacA.begin(), kMacA.end(), na.begin())) << "to the solicitor";
  EXPECT_TRUE(std::equal(a.local.ip.bytes.begin(), a.local.ip.bytes.end(), na.begin() + 38));
  EXPECT_EQ(na[54], 136);
  EXPECT_EQ(na[58], 0x60) << "solicited and override, not a router";
  EXPECT_TRUE(std::equal(b.local.ip.bytes.begin(), b.local.ip.bytes.end(), na.begin() + 62)) << "target";
  EXPECT_EQ(na[78], 2) << "target link-layer address option";
  EXPECT_TRUE(std::equal(kMacB.begin(), kMacB.end(), na.begin() + 80));
  EXPECT_EQ(icmpv6_sum(na), 0);
  EXPECT_EQ(b.table.size(), 0u) << "b learns nothing it did not ask for";

  EXPECT_EQ(classify_frame(na, a.local).kind, FrameKind::kNeighborDiscovery);
  EXPECT_EQ(a.resolver.on_frame(na, out), 0u);
  ASSERT_TRUE(NeighborTable::mac_of(*to_b));
  EXPECT_EQ(*NeighborTable::mac_of(*to_b), kMacB);
}

TEST(NeighborDiscovery, InvalidSolicitationsAreIgnored) {
  Side a(kMacA, "fd00::1:a"), b(kMacB, "fd00::2:b");
  uint8_t buf[kMaxControlFrameBytes], out[kMaxControlFrameBytes];
  const size_t n = a.resolver.request(*a.table.add(b.local.ip), 0, buf);
  ASSERT_GT(b.resolver.on_frame(frame_of(buf, n), out), 0u);
  std::vector<uint8_t> hops = frame_of(buf, n);
  hops[21] = 64;  // forwarded by a router: RFC 4861 7.1.1 discards it
  EXPECT_EQ(b.resolver.on_frame(hops, out), 0u);
  std::vector<uint8_t> sum = frame_of(buf, n);
  sum[60] ^= 1;
  EXPECT_EQ(b.resolver.on_frame(sum, out), 0u) << "bad checksum";
  NeighborTable::Entry* to_c = a.table.add(*parse_ip("fd00::3:c"));
  const size_t other = a.resolver.request(*to_c, 0, buf);
  EXPECT_EQ(b.resolver.on_frame(frame_of(buf, other), out), 0u) << "for another address";
}

TEST(NeighborOption, ParsesListsAndNamesTheBadEntry) {
  auto two = parse_neighbors("10.0.0.2=02:00:00:00:00:02,fd00::3=02:00:00:00:00:03");
  ASSERT_TRUE(two.ok()) << two.status().message();
  ASSERT_EQ(two.value().size(), 2u);
  EXPECT_EQ(ip_string(two.value()[1].first), "fd00::3");
  EXPECT_EQ(two.value()[1].second[5], 3);
  EXPECT_TRUE(parse_neighbors("").ok());
  EXPECT_TRUE(parse_neighbors("").value().empty());
  auto bad = parse_neighbors("10.0.0.2=02:00:00:00:00:02,10.0.0.3");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'10.0.0.3'"), std::string::npos) << bad.status().message();
  EXPECT_EQ(check_neighbors("10.0.0.2=02:00:00:00:00:02"), "");
  EXPECT_NE(check_neighbors("10.0.0.2=zz"), "");
}

}  // namespace
}  // namespace rdmad::verbs::dpdk
