// FlowService's private records.
#pragma once

#include "rdmad/daemon/flow/flow_service.h"
#include "flow_engine.h"

namespace rdmad::flow {

// Memory a peer exported to this node: usable only on flows to that peer.
struct FlowService::Grant {
  std::string from;
  RemoteRange range;
};

}  // namespace rdmad::flow
