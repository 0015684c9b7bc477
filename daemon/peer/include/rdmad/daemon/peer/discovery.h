#pragma once
// Peer discovery through DNS, the pure parts: the `[peer] discover` target ("dns:NAME" for A/AAAA
// records, "dns-srv:NAME" for SRV records), the set of addresses a resolution returned and what
// changed between two of them, and the idle timer of lazily opened sessions. No I/O here: the
// resolver (resolver.h) and the channel (peer_channel.h) use them; unit tests drive them directly
// with a manual clock.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace rdmad::peer {

struct DiscoverTarget {
  enum class Kind : uint8_t { kNone, kAddress, kSrv };
  Kind kind = Kind::kNone;
  std::string name;  // the DNS name, without the scheme
  /// "dns:NAME" / "dns-srv:NAME" / "" (as configured).
  std::string text() const;
};

/// Parses `[peer] discover`: "" is no discovery; "dns:NAME" and "dns-srv:NAME" (the configuration
/// has checked that NAME is a DNS name). nullopt with *error naming what is wrong.
std::optional<DiscoverTarget> parse_discover_target(const std::string& text, std::string* error);

/// One address a resolution found: an IP literal (no brackets) and the peer channel's TCP port.
struct DiscoveredAddress {
  std::string host;
  uint16_t port = 0;
  /// "10.0.0.5:18515" / "[fd00::5]:18515".
  std::string key() const;
  auto operator<=>(const DiscoveredAddress&) const = default;
};

/// What changed between the previous address set and a new one (both sorted and unique).
struct AddressDiff {
  std::vector<DiscoveredAddress> added;
  std::vector<DiscoveredAddress> removed;
  bool empty() const { return added.empty() && removed.empty(); }
};
AddressDiff diff_addresses(const std::set<DiscoveredAddress>& before, const std::set<DiscoveredAddress>& after);

/// At most this many addresses are kept from one resolution (the rest are dropped and logged).
inline constexpr size_t kMaxDiscoveredAddresses = 4096;

/// Idle sessions: a peer whose session carried no flow (no flow, export or grant to or from it)
/// for `idle` is due to be closed. The owner tells it, on each tick, which peers are connected and
/// which of them are in use; it answers which to ask the peer to close now (once per idle period:
/// a peer that refuses, because it uses the session, is asked again after another period).
/// Time is a parameter.
class IdleSessions {
 public:
  using Clock = std::chrono::steady_clock;
  explicit IdleSessions(std::chrono::milliseconds idle) : idle_(idle) {}

  /// `connected`: the peers with a session now, each with whether it is in use. Peers not listed
  /// are forgotten (a new session starts its idle time from its first tick). Returns the peers
  /// idle for at least `idle` that were not asked within the last `idle`. Never any with idle 0.
  std::vector<std::string> tick(Clock::time_point now, const std::map<std::string, bool>& connected);
  std::chrono::milliseconds idle() const { return idle_; }

 private:
  struct Entry {
    Clock::time_point last_used;
    std::optional<Clock::time_point> asked;
  };
  std::chrono::milliseconds idle_;
  std::map<std::string, Entry> peers_;
};

}  // namespace rdmad::peer
