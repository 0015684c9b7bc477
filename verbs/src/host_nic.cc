#include "rdmad/verbs/host_nic.h"

namespace rdmad::verbs {

std::string_view to_string(HostLinkLayer l) {
  switch (l) {
    case HostLinkLayer::kInfiniBand: return "InfiniBand";
    case HostLinkLayer::kEthernet: return "Ethernet";
    case HostLinkLayer::kUnknown: break;
  }
  return "unknown";
}

}  // namespace rdmad::verbs
