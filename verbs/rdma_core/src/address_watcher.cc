#include "address_watcher.h"

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace rdmad::verbs::rdma_core {

namespace {

void parse_one(const nlmsghdr* h, std::vector<AddressEvent>& out) {
  if (h->nlmsg_type != RTM_NEWADDR && h->nlmsg_type != RTM_DELADDR) return;
  if (h->nlmsg_len < NLMSG_LENGTH(sizeof(ifaddrmsg))) return;
  const auto* ifa = static_cast<const ifaddrmsg*>(NLMSG_DATA(h));
  AddressEvent ev;
  ev.kind = h->nlmsg_type == RTM_NEWADDR ? AddressEvent::Kind::kAdded : AddressEvent::Kind::kRemoved;
  ev.ifindex = ifa->ifa_index;
  ev.family = ifa->ifa_family;
  ev.prefix_len = ifa->ifa_prefixlen;
  // IFA_LOCAL is the interface's own address on point-to-point links; IFA_ADDRESS otherwise.
  bool have_local = false;
  int len = static_cast<int>(IFA_PAYLOAD(h));
  for (auto* rta = IFA_RTA(ifa); RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
    if (rta->rta_type != IFA_ADDRESS && rta->rta_type != IFA_LOCAL) continue;
    if (rta->rta_type == IFA_ADDRESS && have_local) continue;
    const size_t n = std::min<size_t>(RTA_PAYLOAD(rta), ev.address.size());
    ev.address.fill(0);
    std::memcpy(ev.address.data(), RTA_DATA(rta), n);
    have_local = have_local || rta->rta_type == IFA_LOCAL;
  }
  out.push_back(ev);
}

}  // namespace

std::vector<AddressEvent> parse_address_messages(std::span<const uint8_t> buffer) {
  std::vector<AddressEvent> out;
  // The buffer is only byte-aligned; copy it so the nlmsghdr walk reads aligned memory.
  std::vector<nlmsghdr> aligned(buffer.size() / sizeof(nlmsghdr) + 1);
  std::copy(buffer.begin(), buffer.end(), reinterpret_cast<uint8_t*>(aligned.data()));
  auto len = static_cast<unsigned>(buffer.size());
  for (const nlmsghdr* h = aligned.data(); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
    if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) continue;
    parse_one(h, out);
  }
  return out;
}

VerbsResult<AddressWatcher> AddressWatcher::open() {
  const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return last_error("socket(AF_NETLINK)", "");
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    auto err = last_error("bind(AF_NETLINK)", "");
    ::close(fd);
    return err;
  }
  return AddressWatcher(fd);
}

AddressWatcher AddressWatcher::adopt_fd_for_test(int fd) { return AddressWatcher(fd); }

AddressWatcher::AddressWatcher(AddressWatcher&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}

AddressWatcher& AddressWatcher::operator=(AddressWatcher&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

AddressWatcher::~AddressWatcher() {
  if (fd_ >= 0) ::close(fd_);
}

AddressChanges AddressWatcher::drain() {
  AddressChanges changes;
  alignas(nlmsghdr) std::array<uint8_t, 16384> buf;
  for (;;) {
    const ssize_t n = ::recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {
        changes.overflow = true;
        continue;
      }
      break;  // EAGAIN: nothing more pending
    }
    if (n == 0) break;
    auto events = parse_address_messages(std::span<const uint8_t>(buf.data(), static_cast<size_t>(n)));
    changes.events.insert(changes.events.end(), events.begin(), events.end());
  }
  return changes;
}

}  // namespace rdmad::verbs::rdma_core
