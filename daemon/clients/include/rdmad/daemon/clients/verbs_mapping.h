#pragma once
// The client protocol's names for what the transport interface calls otherwise, in one place for
// the registrations of client memory (client_service.cc) and of what flows expose to peers (flow).
#include <cstdint>

#include "rdmad/rdmad.h"
#include "rdmad/verbs/status.h"

namespace rdmad::clients {

/// RDMAD_ACCESS_* onto verbs::Access (atomics and relaxed ordering have no verbs flag yet).
uint32_t to_verbs_access(uint32_t rdmad_access);

/// The client status for a transport error (no resource and not supported kept, else system).
rdmad_status to_client_status(verbs::StatusCode code);

}  // namespace rdmad::clients
