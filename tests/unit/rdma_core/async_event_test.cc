#include "async_event.h"

#include <gtest/gtest.h>

namespace rdmad::verbs::rdma_core {
namespace {

ibv_async_event port_event(ibv_event_type t, int port) {
  ibv_async_event ev{};
  ev.event_type = t;
  ev.element.port_num = port;
  return ev;
}

TEST(RdmaCoreAsyncEvent, PortEventsCarryThePort) {
  const auto up = translate_async_event(port_event(IBV_EVENT_PORT_ACTIVE, 2));
  EXPECT_EQ(up.kind, AsyncEvent::Kind::kPortActive);
  EXPECT_EQ(up.port, 2u);
  EXPECT_EQ(up.text, "port active");
  const auto down = translate_async_event(port_event(IBV_EVENT_PORT_ERR, 1));
  EXPECT_EQ(down.kind, AsyncEvent::Kind::kPortDown);
  EXPECT_EQ(down.port, 1u);
  EXPECT_EQ(translate_async_event(port_event(IBV_EVENT_GID_CHANGE, 1)).kind, AsyncEvent::Kind::kPortChanged);
}

TEST(RdmaCoreAsyncEvent, QpErrorsCarryTheQpNumber) {
  ibv_qp qp{};
  qp.qp_num = 0x1a2b;
  for (auto t : {IBV_EVENT_QP_FATAL, IBV_EVENT_QP_REQ_ERR, IBV_EVENT_QP_ACCESS_ERR}) {
    ibv_async_event ev{};
    ev.event_type = t;
    ev.element.qp = &qp;
    const auto a = translate_async_event(ev);
    EXPECT_EQ(a.kind, AsyncEvent::Kind::kQpFatal);
    EXPECT_EQ(a.qp_num, 0x1a2bu);
  }
}

TEST(RdmaCoreAsyncEvent, DeviceFatal) {
  ibv_async_event ev{};
  ev.event_type = IBV_EVENT_DEVICE_FATAL;
  EXPECT_EQ(translate_async_event(ev).kind, AsyncEvent::Kind::kDeviceFatal);
}

}  // namespace
}  // namespace rdmad::verbs::rdma_core
