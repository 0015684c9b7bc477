#pragma once
// Resolves the discovery target on a thread of its own, never on the control io_context: the C
// library's resolver blocks (for as long as resolv.conf's timeouts and attempts say when a server
// does not answer). A/AAAA records through getaddrinfo; SRV records through libresolv
// (res_nquery, then ns_initparse / ns_parserr / dn_expand), their targets' addresses from the
// answer's additional section or else getaddrinfo. No DNS message is parsed by hand.
//
// Bounded: one resolution at a time and at most one waiting (a newer request replaces the
// waiting one); at most kMaxDiscoveredAddresses addresses per answer. The result is posted to the
// io_context. Destruction never waits for a resolution in progress: the thread is left to finish
// it and then exits without touching anything but its own shared state.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "rdmad/daemon/peer/discovery.h"

namespace rdmad::peer {

struct Resolution {
  std::vector<DiscoveredAddress> addresses;  // sorted, unique
  std::string error;                         // empty: the lookup succeeded (possibly with no address)
  std::string note;                          // e.g. "no such name" or "truncated to 4096 addresses"
  std::chrono::microseconds took{0};
};

/// Resolves `target` now, on the calling thread (the resolver thread's body; tests call it
/// directly). A/AAAA addresses get `port`; SRV records carry their own.
Resolution resolve_now(const DiscoverTarget& target, uint16_t port);

class Resolver {
 public:
  explicit Resolver(boost::asio::io_context& io);
  ~Resolver();
  Resolver(const Resolver&) = delete;
  Resolver& operator=(const Resolver&) = delete;

  /// Queues a resolution; `done` runs on the io_context with the result (not after destruction).
  void resolve(DiscoverTarget target, uint16_t port, std::function<void(Resolution)> done);

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
};

}  // namespace rdmad::peer
