#include "address_watcher.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

namespace rdmad::verbs::rdma_core {
namespace {

// Builds one RTM_NEWADDR / RTM_DELADDR message as the kernel sends it.
std::vector<uint8_t> addr_message(uint16_t type, int family, uint32_t ifindex, const void* addr, size_t len,
                                  uint8_t prefix, uint16_t rta_type = IFA_ADDRESS) {
  std::vector<uint8_t> buf(NLMSG_SPACE(sizeof(ifaddrmsg)) + RTA_SPACE(len));
  auto* h = reinterpret_cast<nlmsghdr*>(buf.data());
  h->nlmsg_len = static_cast<uint32_t>(NLMSG_LENGTH(sizeof(ifaddrmsg)) + RTA_SPACE(len));
  h->nlmsg_type = type;
  auto* ifa = static_cast<ifaddrmsg*>(NLMSG_DATA(h));
  ifa->ifa_family = static_cast<uint8_t>(family);
  ifa->ifa_prefixlen = prefix;
  ifa->ifa_index = ifindex;
  auto* rta = reinterpret_cast<rtattr*>(reinterpret_cast<uint8_t*>(ifa) + NLMSG_ALIGN(sizeof(ifaddrmsg)));
  rta->rta_type = rta_type;
  rta->rta_len = static_cast<uint16_t>(RTA_LENGTH(len));
  std::memcpy(RTA_DATA(rta), addr, len);
  buf.resize(h->nlmsg_len);
  return buf;
}

std::vector<uint8_t> v4_message(uint16_t type, uint32_t ifindex, const char* text, uint8_t prefix,
                                uint16_t rta_type = IFA_ADDRESS) {
  in_addr a{};
  inet_pton(AF_INET, text, &a);
  return addr_message(type, AF_INET, ifindex, &a, sizeof(a), prefix, rta_type);
}

TEST(RdmaCoreAddressMessages, ParsesNewAndDeletedAddresses) {
  auto buf = v4_message(RTM_NEWADDR, 4, "10.10.1.11", 24);
  in6_addr a6{};
  inet_pton(AF_INET6, "fd00:10:1::11", &a6);
  const auto del = addr_message(RTM_DELADDR, AF_INET6, 6, &a6, sizeof(a6), 64);
  buf.resize(NLMSG_ALIGN(buf.size()));
  buf.insert(buf.end(), del.begin(), del.end());
  const auto events = parse_address_messages(buf);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, AddressEvent::Kind::kAdded);
  EXPECT_EQ(events[0].ifindex, 4u);
  EXPECT_EQ(events[0].family, AF_INET);
  EXPECT_EQ(events[0].prefix_len, 24);
  EXPECT_EQ(events[0].address[0], 10);
  EXPECT_EQ(events[0].address[3], 11);
  EXPECT_EQ(events[1].kind, AddressEvent::Kind::kRemoved);
  EXPECT_EQ(events[1].family, AF_INET6);
  EXPECT_EQ(std::memcmp(events[1].address.data(), &a6, 16), 0);
}

TEST(RdmaCoreAddressMessages, IgnoresOtherMessagesAndTruncation) {
  auto link = v4_message(RTM_NEWLINK, 1, "1.2.3.4", 8);
  EXPECT_TRUE(parse_address_messages(link).empty());
  auto cut = v4_message(RTM_NEWADDR, 1, "1.2.3.4", 8);
  cut.resize(10);
  EXPECT_TRUE(parse_address_messages(cut).empty());
  EXPECT_TRUE(parse_address_messages({}).empty());
}

TEST(RdmaCoreAddressWatcher, DrainsMessagesFedThroughASocketpair) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, sv), 0);
  auto watcher = AddressWatcher::adopt_fd_for_test(sv[0]);
  EXPECT_FALSE(watcher.drain().any());
  const auto a = v4_message(RTM_NEWADDR, 4, "10.10.1.11", 24);
  const auto b = v4_message(RTM_DELADDR, 4, "10.10.1.11", 24);
  ASSERT_EQ(send(sv[1], a.data(), a.size(), 0), static_cast<ssize_t>(a.size()));
  ASSERT_EQ(send(sv[1], b.data(), b.size(), 0), static_cast<ssize_t>(b.size()));
  const auto changes = watcher.drain();
  ASSERT_EQ(changes.events.size(), 2u);
  EXPECT_EQ(changes.events[0].kind, AddressEvent::Kind::kAdded);
  EXPECT_EQ(changes.events[1].kind, AddressEvent::Kind::kRemoved);
  EXPECT_FALSE(watcher.drain().any());
  close(sv[1]);
}

// Sends one RTM_NEWADDR/RTM_DELADDR request for 10.77.0.1/24 on `ifindex`; 0 on success.
int change_address(uint16_t type, uint32_t ifindex) {
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return errno;
  // The kernel wants IFA_LOCAL (the interface's own address) in an IPv4 request.
  auto msg = v4_message(type, ifindex, "10.77.0.1", 24, IFA_LOCAL);
  auto* h = reinterpret_cast<nlmsghdr*>(msg.data());
  h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | (type == RTM_NEWADDR ? NLM_F_CREATE | NLM_F_EXCL : 0);
  h->nlmsg_seq = 1;
  int rc = send(fd, msg.data(), msg.size(), 0) == static_cast<ssize_t>(msg.size()) ? 0 : errno;
  alignas(nlmsghdr) uint8_t ack[512];
  if (rc == 0) {
    const ssize_t n = recv(fd, ack, sizeof(ack), 0);
    const auto* ah = reinterpret_cast<const nlmsghdr*>(ack);
    if (n < static_cast<ssize_t>(NLMSG_LENGTH(sizeof(nlmsgerr))) || ah->nlmsg_type != NLMSG_ERROR) {
      rc = EPROTO;
    } else {
      rc = -static_cast<const nlmsgerr*>(NLMSG_DATA(ah))->error;
    }
  }
  close(fd);
  return rc;
}

// Waits for events from the watcher for at most `deadline`; returns what arrived.
std::vector<AddressEvent> wait_for_events(AddressWatcher& w, size_t want,
                                          std::chrono::milliseconds deadline) {
  std::vector<AddressEvent> got;
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (got.size() < want && std::chrono::steady_clock::now() < until) {
    pollfd p{w.fd(), POLLIN, 0};
    poll(&p, 1, 50);
    auto c = w.drain();
    got.insert(got.end(), c.events.begin(), c.events.end());
  }
  return got;
}

// The real kernel path, in a private network namespace so the host's addresses are untouched: add and
// remove an address on the namespace's loopback and expect the watcher to see both.
TEST(RdmaCoreAddressWatcher, SeesRealAddressChangesInAPrivateNetworkNamespace) {
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(pipefd[0]);
    auto report = [&](char code) {
      (void)!write(pipefd[1], &code, 1);
      _exit(0);
    };
    if (unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0 && unshare(CLONE_NEWNET) != 0) report('S');
    auto w = AddressWatcher::open();
    if (!w.ok()) report('O');
    const uint32_t lo = if_nametoindex("lo");
    if (lo == 0) report('L');
    if (change_address(RTM_NEWADDR, lo) != 0) report('a');
    auto added = wait_for_events(*w, 1, std::chrono::seconds(5));
    if (added.size() != 1 || added[0].kind != AddressEvent::Kind::kAdded || added[0].ifindex != lo ||
        added[0].family != AF_INET || added[0].address[0] != 10 || added[0].address[1] != 77 ||
        added[0].prefix_len != 24) {
      report('A');
    }
    if (change_address(RTM_DELADDR, lo) != 0) report('d');
    auto removed = wait_for_events(*w, 1, std::chrono::seconds(5));
    if (removed.size() != 1 || removed[0].kind != AddressEvent::Kind::kRemoved) report('D');
    report('K');
  }
  close(pipefd[1]);
  char code = 0;
  const ssize_t n = read(pipefd[0], &code, 1);
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_EQ(n, 1) << "child died";
  if (code == 'S') GTEST_SKIP() << "cannot create a private network namespace to change addresses in";
  EXPECT_EQ(code, 'K') << "O: open failed, L: no lo, a: add failed, A: add event wrong, d: delete failed, D: "
                          "delete event wrong";
}

}  // namespace
}  // namespace rdmad::verbs::rdma_core
