#pragma once
// Counters the interop peers compare: the soft NIC's (NicCounters, by name) and an rxe device's
// hw_counters directory in sysfs. Deltas over a phase; names are kept as the sources spell them.
#include <cstdint>
#include <map>
#include <string>

#include "rdmad/verbs/counters.h"

namespace rdmad::vm {

using CounterMap = std::map<std::string, uint64_t>;

/// The soft NIC's counters by name; drops as "drop_<reason>".
CounterMap soft_counters(const verbs::NicCounters& c);
/// Every file of an hw_counters directory (empty when it cannot be read).
CounterMap read_hw_counters(const std::string& dir);
/// after - before, name by name (names missing before count from 0).
CounterMap delta(const CounterMap& before, const CounterMap& after);
/// "name=value ..." of the non-zero entries (all of them with `all`).
std::string to_line(const CounterMap& m, bool all = false);
/// Parses what to_line wrote.
CounterMap from_line(const std::string& line);
/// 0 when absent.
inline uint64_t at(const CounterMap& m, const std::string& name) {
  auto it = m.find(name);
  return it == m.end() ? 0 : it->second;
}

}  // namespace rdmad::vm
