#include "async_event.h"

#include <fcntl.h>

namespace rdmad::verbs::rdma_core {

AsyncEvent translate_async_event(const ibv_async_event& ev) {
  AsyncEvent out;
  out.raw = ev.event_type;
  out.text = ibv_event_type_str(ev.event_type);
  switch (ev.event_type) {
    case IBV_EVENT_PORT_ACTIVE:
      out.kind = AsyncEvent::Kind::kPortActive;
      out.port = static_cast<unsigned>(ev.element.port_num);
      break;
    case IBV_EVENT_PORT_ERR:
      out.kind = AsyncEvent::Kind::kPortDown;
      out.port = static_cast<unsigned>(ev.element.port_num);
      break;
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
    case IBV_EVENT_GID_CHANGE:
      out.kind = AsyncEvent::Kind::kPortChanged;
      out.port = static_cast<unsigned>(ev.element.port_num);
      break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
      out.kind = AsyncEvent::Kind::kQpFatal;
      out.qp_num = ev.element.qp != nullptr ? ev.element.qp->qp_num : 0;
      break;
    case IBV_EVENT_CQ_ERR:
      out.kind = AsyncEvent::Kind::kCqError;
      break;
    case IBV_EVENT_DEVICE_FATAL:
      out.kind = AsyncEvent::Kind::kDeviceFatal;
      break;
    default:
      out.kind = AsyncEvent::Kind::kOther;
      if (ev.event_type == IBV_EVENT_COMM_EST || ev.event_type == IBV_EVENT_SQ_DRAINED ||
          ev.event_type == IBV_EVENT_PATH_MIG || ev.event_type == IBV_EVENT_PATH_MIG_ERR ||
          ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED) {
        out.qp_num = ev.element.qp != nullptr ? ev.element.qp->qp_num : 0;
      }
      break;
  }
  return out;
}

std::optional<AsyncEvent> read_async_event(ibv_context* ctx) {
  ibv_async_event ev{};
  if (ibv_get_async_event(ctx, &ev) != 0) return std::nullopt;
  AsyncEvent out = translate_async_event(ev);
  ibv_ack_async_event(&ev);
  return out;
}

bool make_async_fd_nonblocking(ibv_context* ctx) {
  const int flags = fcntl(ctx->async_fd, F_GETFL);
  return flags >= 0 && fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

}  // namespace rdmad::verbs::rdma_core
