#pragma once
// What each phase's counters must show. The soft side checks its own NIC; the rxe side checks
// rxe's hw_counters against the soft NIC's counts, which the soft side sends it at the end.
#include <string>
#include <vector>

#include "counters.h"

namespace rdmad::vm {

/// Failures of the soft NIC's counters (a delta over the phase); empty when it passed.
std::vector<std::string> check_soft(const std::string& phase, const CounterMap& soft);
/// Failures of rxe's counters (a delta over the phase) against the soft NIC's.
std::vector<std::string> check_rxe(const std::string& phase, const CounterMap& rxe, const CounterMap& soft);

}  // namespace rdmad::vm
