// The rdma_core Device: port queries (ibv_query_port over sysfs facts, the GID selected now), PD and
// CQ creation, counters from sysfs.
#include <fcntl.h>
#include <fmt/format.h>

#include "rc_objects.h"
#include "rdmad/nic_cc/port_counters.h"
#include "async_event.h"
#include "device_mapping.h"
#include "port_selection.h"

namespace rdmad::verbs::rdma_core {

const PortInfo* DeviceState::sysfs_port(uint8_t port_num) const {
  for (const PortInfo& p : sysfs.ports) {
    if (p.port == port_num) return &p;
  }
  return nullptr;
}

GidChoice DeviceState::select_gid_now(uint8_t port_num) const {
  const PortInfo* port = sysfs_port(port_num);
  PortInfo fallback;
  fallback.port = port_num;
  if (port == nullptr) port = &fallback;
  auto match = gid_match_from_config(config, root, port->netdev);
  if (!match) return {std::nullopt, match.error()};
  auto table = read_gid_table_verbs(ctx.get(), sysfs.name, port_num);
  if (table) return select_port_gid(*table, *port, *match);
  const auto from_sysfs = read_gid_table_sysfs(root, sysfs.name, port_num);
  return select_port_gid(from_sysfs, *port, *match);
}

Result<PathConfig> DeviceState::path_config() const {
  ibv_port_attr attr{};
  if (const int rc = ibv_query_port(ctx.get(), config.port, &attr); rc != 0) {
    return Status::error(
        VerbsError{fmt::format("ibv_query_port({})", config.port), sysfs.name, rc > 0 ? rc : errno}
            .message());
  }
  PathConfig p;
  p.port_num = config.port;
  p.dscp = config.dscp;
  p.sl = config.sl;
  if (attr.link_layer == IBV_LINK_LAYER_INFINIBAND) {
    // InfiniBand routes by LID: the QP's modify fills dlid from QpAttr::dest_lid. The port GID
    // (its subnet prefix) decides whether a peer is in another subnet and needs a GRH.
    p.roce = false;
    if (attr.state != IBV_PORT_ACTIVE || attr.lid == 0) {
      return Status::error(fmt::format("{} port {}: InfiniBand port not ACTIVE (no LID from a subnet manager)",
                                       sysfs.name, config.port));
    }
    if (const GidChoice gid = select_gid_now(config.port); gid.ok()) {
      p.sgid_index = static_cast<uint8_t>(gid.entry->index);
      p.sgid = gid.entry->gid;
    }
    return p;
  }
  const GidChoice gid = select_gid_now(config.port);
  if (!gid.ok()) {
    return Status::error(fmt::format("{} port {}: no source GID: {}", sysfs.name, config.port, gid.reason));
  }
  p.sgid_index = static_cast<uint8_t>(gid.entry->index);
  return p;
}

RcDevice::RcDevice(std::shared_ptr<DeviceState> state) : state_(std::move(state)) {
  // Events are read from the daemon's event loop: the async fd must never block it.
  events_ok_ = make_async_fd_nonblocking(state_->ctx.get());
  info_.name = state_->sysfs.name;
  info_.backend = "rdma_core";
  info_.port_count = state_->caps.phys_port_cnt;
}

Result<verbs::PortInfo> RcDevice::query_port(uint8_t port_num) const {
  // Any port can be described; QPs use the configured one. The GID rule (gid_netdev empty) follows
  // each port's own netdev.
  ibv_port_attr attr{};
  if (const int rc = ibv_query_port(state_->ctx.get(), port_num, &attr); rc != 0) {
    return Status::error(
        VerbsError{fmt::format("ibv_query_port({})", port_num), info_.name, rc > 0 ? rc : errno}.message());
  }
  // Rate, netdev and MTU fallback come from sysfs, which is re-read: the link may have renegotiated.
  const DeviceInfo now = read_device_sysfs(state_->root, info_.name);
  PortInfo port;
  port.port = port_num;
  for (const PortInfo& p : now.ports) {
    if (p.port == port_num) port = p;
  }
  const GidChoice gid = state_->select_gid_now(port_num);
  verbs::PortInfo out = to_verbs_port(port, gid.entry ? gid.entry->gid : GidBytes{});
  apply_port_attr(attr, out);
  return out;
}

Result<std::unique_ptr<verbs::ProtectionDomain>> RcDevice::alloc_pd() {
  auto pd = rdma_core::ProtectionDomain::allocate(state_->ctx);
  if (!pd) return status_from_errno(pd.error().err, pd.error().message());
  return std::unique_ptr<verbs::ProtectionDomain>(new RcProtectionDomain(state_, std::move(pd.value())));
}

Result<std::unique_ptr<verbs::CompletionQueue>> RcDevice::create_cq(uint32_t depth) {
  if (depth == 0 || depth > state_->caps.max_cqe) {
    return Status::error(
        fmt::format("cq depth {} outside 1..{} on {}", depth, state_->caps.max_cqe, info_.name));
  }
  // Each CQ gets its own completion channel (one fd) for request_notify(); a device that refuses
  // channels still gets a polling-only CQ.
  std::optional<rdma_core::CompletionChannel> channel;
  if (auto ch = rdma_core::CompletionChannel::create(state_->ctx); ch) {
    const int flags = ::fcntl(ch.value().fd(), F_GETFL);
    if (flags >= 0 && ::fcntl(ch.value().fd(), F_SETFL, flags | O_NONBLOCK) == 0) channel = std::move(ch.value());
  }
  auto cq = rdma_core::CompletionQueue::create(state_->ctx, static_cast<int>(depth),
                                               channel ? &*channel : nullptr, 0);
  if (!cq) return status_from_errno(cq.error().err, cq.error().message());
  return std::unique_ptr<verbs::CompletionQueue>(
      new RcCompletionQueue(std::move(channel), std::move(cq.value()), depth));
}

NicCounters RcDevice::counters() const {
  const auto port = nic_cc::read_port_counters(state_->root, info_.name, state_->config.port);
  const auto hw = nic_cc::read_hw_counters(state_->root, info_.name, state_->config.port);
  return to_nic_counters(port ? &port.value() : nullptr, hw ? &hw.value() : nullptr);
}

}  // namespace rdmad::verbs::rdma_core

namespace rdmad::verbs::rdma_core {

int RcDevice::event_fd() const { return events_ok_ ? state_->ctx.get()->async_fd : -1; }

std::vector<verbs::DeviceEvent> RcDevice::read_events() {
  std::vector<verbs::DeviceEvent> out;
  while (auto ev = read_async_event(state_->ctx.get())) {
    verbs::DeviceEvent e;
    switch (ev->kind) {
      case AsyncEvent::Kind::kPortActive: e.kind = verbs::DeviceEvent::Kind::kPortActive; break;
      case AsyncEvent::Kind::kPortDown: e.kind = verbs::DeviceEvent::Kind::kPortDown; break;
      case AsyncEvent::Kind::kPortChanged: e.kind = verbs::DeviceEvent::Kind::kPortChanged; break;
      case AsyncEvent::Kind::kQpFatal:
        // A responder QP that refused a peer's request (bad rkey, bad opcode) is in ERR too, but
        // the path is fine and the peer's requester learns it from its completion: only a QP that
        // failed on its own (IBV_EVENT_QP_FATAL) is a fault of this NIC's path.
        e.kind = ev->raw == IBV_EVENT_QP_FATAL ? verbs::DeviceEvent::Kind::kQpFatal : verbs::DeviceEvent::Kind::kOther;
        break;
      case AsyncEvent::Kind::kCqError: e.kind = verbs::DeviceEvent::Kind::kCqError; break;
      case AsyncEvent::Kind::kDeviceFatal: e.kind = verbs::DeviceEvent::Kind::kDeviceFatal; break;
      case AsyncEvent::Kind::kOther: e.kind = verbs::DeviceEvent::Kind::kOther; break;
    }
    e.port = static_cast<uint8_t>(ev->port);
    e.qp_num = ev->qp_num;
    e.text = std::move(ev->text);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace rdmad::verbs::rdma_core
