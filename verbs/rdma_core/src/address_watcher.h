#pragma once
// Watches rtnetlink for address changes (RTM_NEWADDR / RTM_DELADDR, IPv4 and IPv6). GID tables follow
// IP addresses, so any change means "select the source GID again". The socket is non-blocking: poll
// fd() for readability (an Asio stream_descriptor in the daemon) and call drain().
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "verbs_error.h"

namespace rdmad::verbs::rdma_core {

struct AddressEvent {
  enum class Kind : uint8_t { kAdded, kRemoved };
  Kind kind = Kind::kAdded;
  uint32_t ifindex = 0;
  int family = 0;                     // AF_INET or AF_INET6
  std::array<uint8_t, 16> address{};  // IPv4 in the first 4 bytes
  uint8_t prefix_len = 0;
};

// Address events in one buffer of netlink messages (other message types are skipped).
std::vector<AddressEvent> parse_address_messages(std::span<const uint8_t> buffer);

struct AddressChanges {
  std::vector<AddressEvent> events;
  bool overflow = false;  // the kernel dropped messages (ENOBUFS): re-select anyway
  bool any() const { return overflow || !events.empty(); }
};

class AddressWatcher {
 public:
  // Opens a NETLINK_ROUTE socket subscribed to IPv4 and IPv6 address groups (needs no privileges).
  static VerbsResult<AddressWatcher> open();
  // Test hook: watch an arbitrary datagram socket (a socketpair end fed with netlink messages).
  static AddressWatcher adopt_fd_for_test(int fd);

  AddressWatcher(AddressWatcher&& o) noexcept;
  AddressWatcher& operator=(AddressWatcher&& o) noexcept;
  AddressWatcher(const AddressWatcher&) = delete;
  AddressWatcher& operator=(const AddressWatcher&) = delete;
  ~AddressWatcher();

  int fd() const { return fd_; }
  // Reads every pending message without blocking.
  AddressChanges drain();

 private:
  explicit AddressWatcher(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace rdmad::verbs::rdma_core
