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
  uint32_t connect_timeout_ms = RDMAD_DEFAULT_CONNECT_TIMEOUT_MS;  // each connection attempt
  std::map<MrCacheKey, rdmad_mr*> cache;  // live registrations, by identity
};

namespace rdmad::client {

// Sends a request. When the connection was found gone before the request left, reconnects
// (within the client's reconnect timeout), reports every live registration as lost and retries
// once. When it dropped with the request in flight, RDMAD_ERR_DAEMON_GONE (see
// rdmad_set_reconnect_timeout_ms for the one case it is sent again). Caller holds client->mu.
Reply call(rdmad_client* client, proto::MsgType type, std::span<const std::byte> body, int fd);

// Records the failure message for rdmad_last_error() and returns status.
rdmad_status fail(rdmad_client* client, rdmad_status status, std::string message);

}  // namespace rdmad::client
