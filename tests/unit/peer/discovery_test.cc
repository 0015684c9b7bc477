// The pure parts of peer discovery: the discover target, the address set diff and the idle timer
// of lazily opened sessions (a manual clock).
#include "rdmad/daemon/peer/discovery.h"

#include <gtest/gtest.h>

namespace rdmad::peer {
namespace {

using namespace std::chrono_literals;
using Clock = IdleSessions::Clock;

TEST(DiscoverTarget, ParsesTheTwoSchemesAndNothing) {
  std::string error;
  auto none = parse_discover_target("", &error);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->kind, DiscoverTarget::Kind::kNone);
  auto a = parse_discover_target("dns:rdmad-peers.rdmad.svc.cluster.local", &error);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->kind, DiscoverTarget::Kind::kAddress);
  EXPECT_EQ(a->name, "rdmad-peers.rdmad.svc.cluster.local");
  EXPECT_EQ(a->text(), "dns:rdmad-peers.rdmad.svc.cluster.local");
  auto srv = parse_discover_target("dns-srv:_rdmad._tcp.peers.test", &error);
  ASSERT_TRUE(srv);
  EXPECT_EQ(srv->kind, DiscoverTarget::Kind::kSrv);
  EXPECT_EQ(srv->name, "_rdmad._tcp.peers.test");
  EXPECT_EQ(srv->text(), "dns-srv:_rdmad._tcp.peers.test");
  EXPECT_FALSE(parse_discover_target("srv:peers.test", &error));
  EXPECT_NE(error.find("dns:NAME"), std::string::npos) << error;
  EXPECT_FALSE(parse_discover_target("dns:", &error));
  EXPECT_NE(error.find("names no host"), std::string::npos) << error;
}

TEST(DiscoveredAddress, KeyBracketsIpv6) {
  EXPECT_EQ((DiscoveredAddress{"10.0.0.5", 18515}).key(), "10.0.0.5:18515");
  EXPECT_EQ((DiscoveredAddress{"fd00::5", 18515}).key(), "[fd00::5]:18515");
}

TEST(AddressDiff, AddedAndRemoved) {
  const std::set<DiscoveredAddress> before{{"10.0.0.1", 1}, {"10.0.0.2", 1}, {"10.0.0.3", 1}};
  const std::set<DiscoveredAddress> after{{"10.0.0.1", 1}, {"10.0.0.3", 2}, {"10.0.0.4", 1}};
  const AddressDiff d = diff_addresses(before, after);
  // The same host on another port is another address.
  EXPECT_EQ(d.added, (std::vector<DiscoveredAddress>{{"10.0.0.3", 2}, {"10.0.0.4", 1}}));
  EXPECT_EQ(d.removed, (std::vector<DiscoveredAddress>{{"10.0.0.2", 1}, {"10.0.0.3", 1}}));
  EXPECT_TRUE(diff_addresses(before, before).empty());
  EXPECT_EQ(diff_addresses({}, before).added.size(), 3u);
  EXPECT_EQ(diff_addresses(before, {}).removed.size(), 3u);
}

TEST(IdleSessions, AsksOnceAfterTheIdleTimeAndAgainAfterAnotherPeriod) {
  IdleSessions idle(1000ms);
  const Clock::time_point t0{};
  // A new session's idle time starts at its first tick.
  EXPECT_TRUE(idle.tick(t0, {{"b", false}}).empty());
  EXPECT_TRUE(idle.tick(t0 + 999ms, {{"b", false}}).empty());
  EXPECT_EQ(idle.tick(t0 + 1000ms, {{"b", false}}), std::vector<std::string>{"b"});
  // Asked: not again within a period (the peer may be using it and said nothing).
  EXPECT_TRUE(idle.tick(t0 + 1500ms, {{"b", false}}).empty());
  EXPECT_EQ(idle.tick(t0 + 2000ms, {{"b", false}}), std::vector<std::string>{"b"});
}

TEST(IdleSessions, UseRestartsTheIdleTime) {
  IdleSessions idle(1000ms);
  const Clock::time_point t0{};
  idle.tick(t0, {{"b", false}, {"c", false}});
  EXPECT_TRUE(idle.tick(t0 + 800ms, {{"b", true}, {"c", false}}).empty());
  // c has been idle 1 s, b only 0.2 s since its flow went.
  EXPECT_EQ(idle.tick(t0 + 1000ms, {{"b", false}, {"c", false}}), std::vector<std::string>{"c"});
  EXPECT_EQ(idle.tick(t0 + 1800ms, {{"b", false}, {"c", false}}), std::vector<std::string>{"b"});
}

TEST(IdleSessions, ASessionThatWentAndCameBackStartsAgain) {
  IdleSessions idle(1000ms);
  const Clock::time_point t0{};
  idle.tick(t0, {{"b", false}});
  EXPECT_TRUE(idle.tick(t0 + 900ms, {}).empty());  // closed: forgotten
  EXPECT_TRUE(idle.tick(t0 + 1000ms, {{"b", false}}).empty());
  EXPECT_EQ(idle.tick(t0 + 2000ms, {{"b", false}}), std::vector<std::string>{"b"});
}

TEST(IdleSessions, ZeroNeverCloses) {
  IdleSessions idle(0ms);
  const Clock::time_point t0{};
  idle.tick(t0, {{"b", false}});
  EXPECT_TRUE(idle.tick(t0 + 1000h, {{"b", false}}).empty());
}

}  // namespace
}  // namespace rdmad::peer
