// Registration of the rdma_core backend: device list, open (context, sysfs facts, capabilities,
// source GID check), capabilities probed on the first device.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

#include "rdmad/base/log.h"
#include "host_discovery.h"
#include "rc_objects.h"
#include "device_mapping.h"
#include "port_selection.h"
#include "rdmad/base/log_fields.h"
#include "rdmad/verbs/rdma_core/rdma_core_backend.h"

namespace rdmad::verbs::rdma_core {

namespace {

struct DeviceList {
  ibv_device** list = nullptr;
  int count = 0;
  DeviceList() { list = ibv_get_device_list(&count); }
  ~DeviceList() {
    if (list != nullptr) ibv_free_device_list(list);
  }
  DeviceList(const DeviceList&) = delete;
  DeviceList& operator=(const DeviceList&) = delete;
};

Result<std::unique_ptr<Device>> open_device(const DeviceConfig& device_config) {
  auto parsed = rdma_core_config(device_config);
  if (!parsed.ok()) return parsed.status();
  const RdmaCoreConfig& config = parsed.value();
  DeviceList devices;
  if (devices.count <= 0 || devices.list == nullptr) {
    return Status::error("no RDMA device: ibv_get_device_list found 0 devices");
  }
  ibv_device* dev = config.name.empty() ? devices.list[0] : nullptr;
  for (int i = 0; dev == nullptr && i < devices.count; ++i) {
    if (config.name == ibv_get_device_name(devices.list[i])) dev = devices.list[i];
  }
  if (dev == nullptr) return Status::error(fmt::format("no RDMA device named '{}'", config.name));
  auto ctx = Context::open(dev);
  if (!ctx) return Status::error(ctx.error().message());
  auto state = std::make_shared<DeviceState>();
  state->ctx = std::move(ctx.value());
  state->root = nic_cc::SysfsRoot(config.sysfs_root);
  state->config = config;
  state->sysfs = read_device_sysfs(state->root, ibv_get_device_name(dev));
  state->sysfs.name = ibv_get_device_name(dev);
  {
    auto pd = rdma_core::ProtectionDomain::allocate(state->ctx);
    if (!pd) return Status::error(pd.error().message());
    auto caps = query_caps(state->ctx, pd.value());
    if (!caps) return Status::error(caps.error().message());
    state->caps = caps.value();
  }
  if (config.port == 0 || config.port > state->caps.phys_port_cnt) {
    return Status::error(
        fmt::format("{} has ports 1..{}, not {}", state->sysfs.name, state->caps.phys_port_cnt, config.port));
  }
  if (auto match = gid_match_from_config(config, state->root, ""); !match)
    return Status::error(match.error());
  const GidChoice gid = state->select_gid_now(config.port);
  if (auto log = log::get(log::Component::kVerbs)) {
    log->info("source gid device={} port={} gid={} reason={}", state->sysfs.name, config.port,
              gid.ok() ? format_gid(gid.entry->gid) : std::string("none"), rdmad::base::q(gid.reason));
  }
  return std::unique_ptr<Device>(new RcDevice(std::move(state)));
}

// Capabilities of the first device; all off when there is none (nothing works then).
Capabilities probe_capabilities() {
  DeviceList devices;
  if (devices.count <= 0 || devices.list == nullptr) return Capabilities{};
  auto ctx = Context::open(devices.list[0]);
  if (!ctx) return Capabilities{};
  auto pd = rdma_core::ProtectionDomain::allocate(ctx.value());
  if (!pd) return Capabilities{};
  auto caps = query_caps(ctx.value(), pd.value());
  if (!caps) return Capabilities{};
  ibv_port_attr port{};
  const uint32_t max_msg = ibv_query_port(ctx->get(), 1, &port) == 0 ? port.max_msg_sz : 0;
  return to_capabilities(caps.value(), max_msg);
}

}  // namespace

Status status_from_errno(int err, std::string message) {
  switch (err) {
    case ENOMEM:
    case EAGAIN:
    case ENOSPC:
      return Status::no_resource(std::move(message));
    case EOPNOTSUPP:
    case EPROTONOSUPPORT:
      return Status::not_supported(std::move(message));
    default:
      return Status::error(std::move(message));
  }
}

std::vector<std::string> list_device_names() {
  DeviceList devices;
  std::vector<std::string> names;
  for (int i = 0; i < devices.count && devices.list != nullptr; ++i) {
    names.emplace_back(ibv_get_device_name(devices.list[i]));
  }
  return names;
}

namespace {

// What the daemon's handling of hardware NICs rests on, whether or not a device is present now.
void add_handling(Capabilities& c) {
  c.registration_faults_in_pages = true;  // ibv_reg_mr pins the pages for the NIC's DMA
  c.sysfs_ports = true;
  c.opens_named_device = true;
  c.address_selects_gid = true;  // the GID of [[nic]] address, re-selected at every use
  c.retries_failed_open = true;
}

}  // namespace

Capabilities static_capabilities() {
  Capabilities c;
  add_handling(c);
  return c;
}

BackendInfo backend_info() {
  BackendInfo b;
  b.name = "rdma_core";
  b.caps = probe_capabilities();
  add_handling(b.caps);
  b.options = option_table();
  b.open = open_device;
  b.list_devices = list_device_names;
  b.discover = discover_host;
  b.watch_addresses = watch_addresses;
  return b;
}

const SplitKeys* region_slices(const verbs::MemoryRegion& mr) {
  const auto* rc = dynamic_cast<const RcMemoryRegion*>(&mr);
  return rc != nullptr ? &rc->keys() : nullptr;
}

std::optional<NicLocation> nic_location(const Device& device) {
  const auto* rc = dynamic_cast<const RcDevice*>(&device);
  if (rc == nullptr) return std::nullopt;
  const DeviceState& st = rc->state();
  NicLocation loc;
  loc.device = st.sysfs.name;
  loc.port = st.config.port;
  if (const PortInfo* p = st.sysfs_port(st.config.port); p != nullptr) loc.netdev = p->netdev;
  loc.pci_address = st.sysfs.pci_address;
  loc.sysfs_root = st.root.root().string();
  return loc;
}

std::optional<uint32_t> vendor_id(const Device& device) {
  const auto* rc = dynamic_cast<const RcDevice*>(&device);
  if (rc == nullptr) return std::nullopt;
  return rc->state().caps.vendor_id;
}

}  // namespace rdmad::verbs::rdma_core
