// Internal state behind the opaque rdmad_client and rdmad_mr handles.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "channel.h"
#include "rdmad/rdmad.h"

// Identity of a registration for the client-side cache: kind, file (host) or pointer (gpu),
// offset, length, access, nic_mask.
using MrCacheKey = std::tuple<int, uint64_t, uint64_t, uint64_t, uint64_t, uint32_t, uint32_t>;

struct rdmad_mr {
  uint64_t handle = 0;
  uint64_t iova = 0;
  uint64_t length = 0;
  std::vector<rdmad_nic_key> keys;
  uint32_t refs = 1;
  bool lost = false;
  MrCacheKey cache_key;
};

struct rdmad_client {
  std::mutex mu;
  std::string path;
  rdmad::client::Channel channel;
  std::string last_error;
  rdmad_lost_fn lost_fn = nullptr;
  void* lost_user = nullptr;
  uint32_t reconnect_timeout_ms = 5000;
  std::map<MrCacheKey, rdmad_mr*> cache;  // live registrations, by identity
};

namespace rdmad::client {

// Sends a request; when the connection dropped, reconnects (within the client's timeout), reports
// every live registration as lost and retries once. Caller holds client->mu.
Reply call(rdmad_client* client, proto::MsgType type, std::span<const std::byte> body, int fd);

// Records the failure message for rdmad_last_error() and returns status.
rdmad_status fail(rdmad_client* client, rdmad_status status, std::string message);

}  // namespace rdmad::client
