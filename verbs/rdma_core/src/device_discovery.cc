#include "rdmad/base/log.h"
#include "device_discovery.h"

#include <fmt/format.h>
#include <infiniband/verbs.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <memory>

#include "handles.h"
#include "rdmad/base/log_fields.h"

namespace rdmad::verbs::rdma_core {

uint32_t mtu_bytes(int ibv_mtu) {
  switch (ibv_mtu) {
    case IBV_MTU_256:
      return 256;
    case IBV_MTU_512:
      return 512;
    case IBV_MTU_1024:
      return 1024;
    case IBV_MTU_2048:
      return 2048;
    case IBV_MTU_4096:
      return 4096;
    default:
      return 0;
  }
}

namespace {

std::shared_ptr<spdlog::logger> logger() { return log::get(log::Component::kVerbs); }

// Fills what only the device knows (or knows better than sysfs): state and active MTU.
void enrich_from_verbs(ibv_device* dev, DeviceInfo& info, std::vector<std::string>& warnings) {
  auto ctx = Context::open(dev);
  if (!ctx) {
    warnings.push_back(ctx.error().message());
    return;
  }
  for (auto& p : info.ports) {
    ibv_port_attr attr{};
    if (const int rc = ibv_query_port(ctx->get(), static_cast<uint8_t>(p.port), &attr); rc != 0) {
      warnings.push_back(
          VerbsError{fmt::format("ibv_query_port({})", p.port), info.name, rc > 0 ? rc : errno}.message());
      continue;
    }
    p.state = attr.state;
    p.active_mtu_bytes = mtu_bytes(attr.active_mtu);
    p.link_layer = attr.link_layer == IBV_LINK_LAYER_ETHERNET ? LinkLayer::kEthernet : LinkLayer::kInfiniBand;
    if (p.link_layer == LinkLayer::kInfiniBand) p.lid = attr.lid;
  }
}

}  // namespace

VerbsResult<DiscoveredDevices> discover_devices(const nic_cc::SysfsRoot& root) {
  DiscoveredDevices out;
  int n = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) {
    // ENOSYS: the kernel has no RDMA support at all, which is the same as having no devices.
    if (errno == ENOSYS || errno == 0) {
      logger()->info("no rdma devices found reason=no_kernel_rdma_support");
      return out;
    }
    return last_error("ibv_get_device_list", "");
  }
  std::unique_ptr<ibv_device*, void (*)(ibv_device**)> guard(list, &ibv_free_device_list);
  for (int i = 0; i < n; ++i) {
    DeviceInfo info = read_device_sysfs(root, ibv_get_device_name(list[i]));
    enrich_from_verbs(list[i], info, out.warnings);
    out.devices.push_back(std::move(info));
  }
  if (out.devices.empty()) logger()->info("no rdma devices found");
  for (const auto& w : out.warnings) logger()->warn("rdma device discovery warning detail={}", rdmad::base::q(w));
  return out;
}

}  // namespace rdmad::verbs::rdma_core
