#pragma once
// One phase of the interop test between the two peers over their control channel: a QP pair per
// path MTU, then every case of the plan in order, each announced by its initiator, prepared and
// checked by its target ("case", "ready", "check", "ok"; "fail <why>" from either side ends it).
#include <string>

#include "channel.h"
#include "peer.h"
#include "plan.h"

namespace rdmad::vm {

/// Runs `phase` on this side (`soft` says which side it is). The error names the case.
verbs::Status run_phase(Peer& peer, Channel& ch, const Phase& phase, bool soft, const RegionInfo& remote,
                        Clock::time_point deadline);

/// Sends "fail <why>" and returns the status (so a failing side tells the other before leaving).
verbs::Status fail(Channel& ch, const verbs::Status& st);

}  // namespace rdmad::vm
