#pragma once
// Congestion-control misconfiguration checks over data already read (pure: no I/O). Findings are data
// for the daemon to log and export, never exceptions.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rdmad/nic_cc/cc_enable.h"
#include "rdmad/nic_cc/port_counters.h"

namespace rdmad::nic_cc {

enum class CcFindingKind : uint8_t {
  kCnpIgnoredRising,  // rp_cnp_ignored grew between two samples: CNPs arrive for a priority whose RP is off
  kRpDisabledOnRocePrio,  // the reaction point is off on the priority RoCE traffic uses
  kNpDisabledOnRocePrio,  // the notification point is off on the priority RoCE traffic uses
  kCounterWentBackwards,  // a sample is older than the previous one or the counters were reset
};

struct CcFinding {
  CcFindingKind kind;
  std::string text;  // one operator-facing sentence naming device, port and values
};

struct CcHealthInput {
  std::string device;
  unsigned port = 1;
  int roce_priority = 3;                 // 802.1p priority (traffic class) that carries RoCE traffic
  const HwCounters* previous = nullptr;  // earlier sample; nullptr on the first check
  const HwCounters* current = nullptr;
  std::optional<CcPriorityEnable> enable;  // nullopt where the switches cannot be read (upstream kernel)
};

// Every misconfiguration visible in `in`; empty when all is well (or nothing can be judged).
std::vector<CcFinding> check_cc_health(const CcHealthInput& in);

}  // namespace rdmad::nic_cc
