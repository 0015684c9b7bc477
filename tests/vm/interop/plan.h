#pragma once
// What the two interop peers run, phase by phase. Both sides build the same plan from the phase's
// name, so each knows every case before the initiator announces it (the announcement is checked).
#include <cstdint>
#include <string>
#include <vector>

#include "rdmad/verbs/types.h"

namespace rdmad::vm {

/// One case: `count` work requests of `op`, `size` bytes each, posted back to back.
struct Case {
  verbs::WrOpcode op = verbs::WrOpcode::kRdmaWrite;
  uint32_t size = 0;
  uint32_t count = 1;
  bool soft_initiates = true;  // the soft NIC (host) posts; otherwise the rxe QP (guest) does
};

struct Phase {
  std::string name;
  std::vector<uint32_t> mtus;  // a QP pair per path MTU
  uint8_t timeout = 14;        // QP local ACK timeout (4.096 µs · 2^timeout)
  // The plan for one path MTU.
  std::vector<Case> cases(uint32_t mtu) const;
};

/// "clean": every op, both ways, sizes around each path MTU up to max_mtu; "lossy": larger and
/// pipelined messages at two MTUs (the guest puts netem on the link); "ecn": bulk transfers the
/// guest's RED queue marks. Empty name when the phase is unknown.
Phase make_phase(const std::string& name, uint32_t max_mtu);

/// Bytes one side's source (and destination) area needs for any case of any phase.
inline constexpr size_t kSlotGuardBytes = 64;
inline constexpr size_t kAreaBytes = 4u << 20;
/// Where work request k of a case starts in an area: slots are the size plus guards, 64-aligned.
inline size_t slot_stride(uint32_t size) { return (size + 2 * kSlotGuardBytes + 63) / 64 * 64; }

const char* op_name(verbs::WrOpcode op);
bool parse_op(const std::string& name, verbs::WrOpcode* op);

}  // namespace rdmad::vm
