#pragma once
// What each [[nic]] is opened with (the NICs themselves are daemon::NicSlots, nic_slots.h).
#include "rdmad/config/config.h"
#include "rdmad/verbs/device.h"
#include "rdmad/verbs/registry.h"

namespace rdmad::daemon {

/// How a [[nic]] is opened: the section's keys as the backend's DeviceConfig (the [cc] parameters
/// with the NIC's cnp_dscp, the address as the GID rule where the backend selects GIDs by it, its
/// DSCP and SL). `backend` is the registry's entry for n.backend (null: none).
verbs::DeviceConfig device_config_for(const config::NicSection& n, const config::Config& config,
                                      const verbs::BackendInfo* backend);

}  // namespace rdmad::daemon
