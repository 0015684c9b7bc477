#include "rdmad/daemon/peer/discovery.h"

#include <algorithm>
#include <iterator>

namespace rdmad::peer {

std::string DiscoverTarget::text() const {
  switch (kind) {
    case Kind::kAddress: return "dns:" + name;
    case Kind::kSrv: return "dns-srv:" + name;
    case Kind::kNone: break;
  }
  return {};
}

std::optional<DiscoverTarget> parse_discover_target(const std::string& text, std::string* error) {
  DiscoverTarget t;
  if (text.empty()) return t;
  std::string name;
  if (text.rfind("dns-srv:", 0) == 0) {
    t.kind = DiscoverTarget::Kind::kSrv;
    name = text.substr(8);
  } else if (text.rfind("dns:", 0) == 0) {
    t.kind = DiscoverTarget::Kind::kAddress;
    name = text.substr(4);
  } else {
    *error = "'" + text + "' is not dns:NAME (A/AAAA records) or dns-srv:NAME (SRV records)";
    return std::nullopt;
  }
  // The configuration checked the name (a DNS name: config/src/validators.cc).
  if (name.empty()) {
    *error = "'" + text + "' names no host";
    return std::nullopt;
  }
  t.name = std::move(name);
  return t;
}

std::string DiscoveredAddress::key() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

AddressDiff diff_addresses(const std::set<DiscoveredAddress>& before, const std::set<DiscoveredAddress>& after) {
  AddressDiff d;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(), std::back_inserter(d.added));
  std::set_difference(before.begin(), before.end(), after.begin(), after.end(), std::back_inserter(d.removed));
  return d;
}

std::vector<std::string> IdleSessions::tick(Clock::time_point now, const std::map<std::string, bool>& connected) {
  std::erase_if(peers_, [&](const auto& kv) { return connected.count(kv.first) == 0; });
  std::vector<std::string> due;
  for (const auto& [peer, in_use] : connected) {
    auto [it, fresh] = peers_.try_emplace(peer, Entry{now, std::nullopt});
    Entry& e = it->second;
    if (in_use) {
      e.last_used = now;
      e.asked.reset();
      continue;
    }
    if (idle_.count() <= 0 || now - e.last_used < idle_) continue;
    if (e.asked && now - *e.asked < idle_) continue;
    e.asked = now;
    due.push_back(peer);
  }
  return due;
}

}  // namespace rdmad::peer
