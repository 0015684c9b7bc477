#pragma once
// The backends built into this binary as configuration sees them: names, option tables and the
// capabilities that hold whatever the host has, read without opening or probing a device (the config loader checks
// each [[nic]] against them). register_builtin_backends (registry.h) registers the same backends,
// and each advertises at least these (daemon_backend_names_test checks it).
#include <string>
#include <vector>

#include "rdmad/verbs/registry.h"

namespace rdmad::verbs {

struct BackendDescription {
  std::string name;
  Capabilities caps;  // features and limits a device would show are left at their defaults
  std::vector<OptionSpec> options;  // BackendInfo::options: configuration makes a [[nic]] key of each
};

/// In registration order.
const std::vector<BackendDescription>& builtin_backends();

/// The backend of a [[nic]] that names none (rdma_core: a hardware NIC).
const BackendDescription& default_builtin_backend();

/// nullptr when no built-in backend has that name.
const BackendDescription* find_builtin_backend(const std::string& name);

}  // namespace rdmad::verbs
