#pragma once
// A connected pair of RC QPs on one port of one device (loopback through the NIC), for the hardware suite.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "device_info.h"
#include "gid_table.h"
#include "handles.h"

namespace rdmad::verbs::rdma_core::hw {

struct Loopback {
  Context ctx;
  ProtectionDomain pd;
  CompletionQueue cq;
  QueuePair a;
  QueuePair b;
  std::string how;  // "RoCE gid 3 ..." or "IB lid 0x1a"
};

// Opens `device`, creates and connects two RC QPs on `port` to each other; nullopt with `why` when
// it cannot (no usable GID, port down, ...).
std::optional<Loopback> make_loopback(ibv_device* device, const PortInfo& port, std::string& why);

// Posts one signaled RDMA WRITE of `sges` to (raddr, rkey) on `qp` and waits (≤ 5 s) for its completion
// on `cq`. Returns the empty string on success, else what went wrong.
std::string write_and_wait(const QueuePair& qp, const CompletionQueue& cq, std::vector<ibv_sge> sges,
                           uint64_t raddr, uint32_t rkey);

}  // namespace rdmad::verbs::rdma_core::hw
