#pragma once
// Asynchronous device events (ibv_get_async_event) as plain data for the daemon: port up/down, QP and
// CQ errors, device fatal. Reading happens on the context's async fd (non-blocking, polled by the
// daemon's event loop); translation is pure.
#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>
#include <string>

namespace rdmad::verbs::rdma_core {

struct AsyncEvent {
  enum class Kind : uint8_t {
    kPortActive,   // IBV_EVENT_PORT_ACTIVE
    kPortDown,     // IBV_EVENT_PORT_ERR
    kPortChanged,  // LID, P_Key, GID, SM or client-reregister change: re-read port and GID table
    kQpFatal,      // QP moved to the error state (IBV_EVENT_QP_FATAL / REQ_ERR / ACCESS_ERR)
    kCqError,
    kDeviceFatal,  // the device is gone: every resource on it must be torn down
    kOther,
  };
  Kind kind = Kind::kOther;
  ibv_event_type raw = IBV_EVENT_DEVICE_FATAL;
  unsigned port = 0;    // port events
  uint32_t qp_num = 0;  // QP events
  std::string text;     // ibv_event_type_str
};

// Pure translation of an event as libibverbs delivers it.
AsyncEvent translate_async_event(const ibv_async_event& ev);

// Reads one pending event (acknowledging it) from `ctx`; nullopt when none is pending. The async fd
// must have been made non-blocking (make_async_fd_nonblocking) for this not to wait.
std::optional<AsyncEvent> read_async_event(ibv_context* ctx);
// Sets O_NONBLOCK on ctx->async_fd; false with errno on failure.
bool make_async_fd_nonblocking(ibv_context* ctx);

}  // namespace rdmad::verbs::rdma_core
