#include "rdmad/balancer/balancer_config.h"

namespace rdmad::balancer {

std::string_view to_string(Policy policy) {
  switch (policy) {
    case Policy::kWeighted: return "weighted";
    case Policy::kCongestionAware: return "congestion_aware";
    case Policy::kRoundRobin: return "round_robin";
    case Policy::kHash: return "hash";
  }
  return "?";
}

std::optional<Policy> parse_policy(std::string_view name) {
  for (Policy p : {Policy::kWeighted, Policy::kCongestionAware, Policy::kRoundRobin, Policy::kHash}) {
    if (to_string(p) == name) return p;
  }
  return std::nullopt;
}

}  // namespace rdmad::balancer
