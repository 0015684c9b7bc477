#pragma once
// DPDK's environment abstraction layer, once per process: the first dpdk NIC opened initialises it
// with its eal_args, later NICs share it. It is never torn down (DPDK cannot initialise twice).
#include <string>
#include <vector>

#include "rdmad/verbs/status.h"

namespace rdmad::verbs::dpdk {

/// What eal_args defaults to: no hugepages (--no-huge with -m MiB of ordinary memory), no shared
/// config files, no PCI scan (hot-plugged ports only), no telemetry socket.
inline constexpr const char* kDefaultEalArgs = "--no-huge --no-shconf --no-pci --no-telemetry -m 256 --log-level=*:warning";

/// The argument vector rte_eal_init gets for `eal_args`: "rdmad", the arguments split at
/// whitespace, then a --file-prefix unique to this process and `-l <cpu>` (one lcore, on the first
/// CPU `allowed_cpu` names) unless the arguments choose their own.
std::vector<std::string> eal_argv(const std::string& eal_args, int pid, int allowed_cpu);

/// Initialises the EAL with `eal_args` if no NIC has, else checks that `eal_args` is empty or what
/// it was initialised with. rte_eal_init pins the calling thread to the main lcore: its CPU
/// affinity is put back afterwards. DPDK's log lines go to the verbs logger. The error names the
/// option; a failed initialisation fails every later call the same way.
Status ensure_eal(const std::string& eal_args);

}  // namespace rdmad::verbs::dpdk
