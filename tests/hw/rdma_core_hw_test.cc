// Hardware suite for the rdma_core backend: needs RDMA devices (a real NIC or Soft-RoCE, see
// docs/testing.md). Every test skips with the reason where there is nothing to test.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/udmabuf.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "hw_loopback.h"
#include "rdmad/nic_cc/cc_param_store.h"
#include "rdmad/nic_cc/port_counters.h"
#include "device_caps.h"
#include "device_discovery.h"
#include "dmabuf_probe.h"
#include "gid_selector.h"
#include "mr_split.h"

namespace rdmad::verbs::rdma_core {
namespace {

using DeviceList = std::unique_ptr<ibv_device*, void (*)(ibv_device**)>;

class RdmaCoreHw : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    list_ = DeviceList(ibv_get_device_list(&n), &ibv_free_device_list);
    if (!list_ || n == 0) GTEST_SKIP() << "no RDMA devices on this host (ibv_get_device_list found none)";
    for (int i = 0; i < n; ++i) devices_.push_back(list_.get()[i]);
    auto found = discover_devices(root_);
    ASSERT_TRUE(found.ok()) << found.error().message();
    infos_ = std::move(found->devices);
    ASSERT_EQ(infos_.size(), devices_.size());
  }

  // Calls `fn(device, info, port)` for every ACTIVE port; skips the test if there is none.
  template <class Fn>
  void for_each_active_port(Fn fn) {
    bool any = false;
    for (size_t i = 0; i < devices_.size(); ++i) {
      for (const auto& p : infos_[i].ports) {
        if (!p.active()) continue;
        any = true;
        SCOPED_TRACE(infos_[i].name + " port " + std::to_string(p.port));
        fn(devices_[i], infos_[i], p);
      }
    }
    if (!any) GTEST_SKIP() << "RDMA devices exist but no port is ACTIVE";
  }

  // Calls `fn(index, ctx, pd)` with a fresh context and PD of every device.
  template <class Fn>
  void for_each_device(Fn fn) {
    for (size_t i = 0; i < devices_.size(); ++i) {
      SCOPED_TRACE(infos_[i].name);
      auto ctx = Context::open(devices_[i]);
      ASSERT_TRUE(ctx.ok()) << ctx.error().message();
      auto pd = ProtectionDomain::allocate(*ctx);
      ASSERT_TRUE(pd.ok()) << pd.error().message();
      fn(i, *ctx, *pd);
    }
  }

  nic_cc::SysfsRoot root_;
  DeviceList list_{nullptr, &ibv_free_device_list};
  std::vector<ibv_device*> devices_;
  std::vector<DeviceInfo> infos_;
};

TEST_F(RdmaCoreHw, DiscoveryDescribesEveryPort) {
  for (const auto& d : infos_) {
    ASSERT_FALSE(d.ports.empty()) << d.name;
    for (const auto& p : d.ports) {
      EXPECT_NE(p.link_layer, LinkLayer::kUnknown) << d.name;
      EXPECT_GT(p.state, 0) << d.name;
      if (p.active()) {
        EXPECT_GT(p.rate_mbps, 0u) << d.name;
        EXPECT_GT(p.active_mtu_bytes, 0u) << d.name;
      }
    }
    for (const auto& line : describe(d)) std::printf("  %s\n", line.c_str());
  }
}

TEST_F(RdmaCoreHw, VerbsAndSysfsGidTablesAgree) {
  for_each_active_port([&](ibv_device* dev, const DeviceInfo& info, const PortInfo& port) {
    auto ctx = Context::open(dev);
    ASSERT_TRUE(ctx.ok()) << ctx.error().message();
    auto verbs = read_gid_table_verbs(ctx->get(), info.name, port.port);
    ASSERT_TRUE(verbs.ok()) << verbs.error().message();
    const auto sysfs = read_gid_table_sysfs(root_, info.name, port.port);
    EXPECT_EQ(*verbs, sysfs);
  });
}

TEST_F(RdmaCoreHw, RoceV2GidIsFoundOnEveryActiveEthernetPort) {
  for_each_active_port([&](ibv_device*, const DeviceInfo& info, const PortInfo& port) {
    if (port.link_layer != LinkLayer::kEthernet) return;
    GidMatch m;
    m.netdev = port.netdev;
    m.vlan_netdevs = upper_netdevs(root_, port.netdev);
    m.family = IpFamily::kAny;
    const auto choice = select_gid(read_gid_table_sysfs(root_, info.name, port.port), m);
    EXPECT_TRUE(choice.ok()) << choice.reason << " (does " << port.netdev << " have an IP address?)";
  });
}

// RDMA WRITE between two RC QPs of one port; the source is registered as several MRs (small slices so
// a short buffer exercises the split path) and the data must arrive byte-exact.
TEST_F(RdmaCoreHw, RcLoopbackWriteAcrossSplitMrsIsByteExact) {
  for_each_active_port([&](ibv_device* dev, const DeviceInfo&, const PortInfo& port) {
    std::string why;
    auto lb = hw::make_loopback(dev, port, why);
    if (!lb) {
      ADD_FAILURE() << "loopback setup failed: " << why;
      return;
    }
    std::printf("  loopback over %s\n", lb->how.c_str());
    constexpr size_t kBytes = 256 * 1024, kSlice = 64 * 1024;
    std::vector<uint8_t> src(kBytes), dst(kBytes, 0);
    std::iota(src.begin(), src.end(), uint8_t{7});
    const auto plan = plan_mr_slices(kBytes, kSlice);
    ASSERT_EQ(plan.size(), 4u);
    std::vector<MemoryRegion> src_mrs;
    for (const auto& s : plan) {
      auto mr = MemoryRegion::register_host(lb->pd, src.data() + s.offset, s.length, IBV_ACCESS_LOCAL_WRITE);
      ASSERT_TRUE(mr.ok()) << mr.error().message();
      src_mrs.push_back(std::move(mr).value());
    }
    auto dst_mr = MemoryRegion::register_host(lb->pd, dst.data(), dst.size(),
                                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ASSERT_TRUE(dst_mr.ok()) << dst_mr.error().message();
    // One write across every slice boundary: the last 100 bytes of slice 0, all of slices 1 and 2,
    // the first 100 bytes of slice 3 — four SGEs, as many as the QP was created with.
    const uint64_t off = kSlice - 100, len = 2 * kSlice + 200;
    std::vector<ibv_sge> sges;
    for (const auto& piece : split_range(plan, off, len)) {
      sges.push_back({reinterpret_cast<uint64_t>(src.data() + plan[piece.slice].offset + piece.slice_offset),
                      static_cast<uint32_t>(piece.length), src_mrs[piece.slice].lkey()});
    }
    ASSERT_EQ(sges.size(), 4u);
    const auto err =
        hw::write_and_wait(lb->a, lb->cq, sges, reinterpret_cast<uint64_t>(dst.data() + off), dst_mr->rkey());
    ASSERT_EQ(err, "");
    EXPECT_EQ(std::memcmp(dst.data() + off, src.data() + off, len), 0);
    EXPECT_TRUE(
        std::all_of(dst.begin(), dst.begin() + static_cast<long>(off), [](uint8_t b) { return b == 0; }));
    EXPECT_TRUE(
        std::all_of(dst.begin() + static_cast<long>(off + len), dst.end(), [](uint8_t b) { return b == 0; }));
  });
}

// The fd = -1 probe must agree with an actual dma-buf registration (udmabuf provides a dma-buf without
// a GPU).
TEST_F(RdmaCoreHw, DmabufProbeMatchesARealRegistration) {
  const int udmabuf = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
  for_each_device([&](size_t i, const Context&, const ProtectionDomain& pd) {
    const auto probe = probe_dmabuf(pd.get(), infos_[i].name);
    std::printf("  %s\n", probe.detail.c_str());
    EXPECT_NE(probe.support, DmabufSupport::kUnknown) << probe.detail;
    if (udmabuf < 0) return;
    constexpr size_t kSize = 2 * 1024 * 1024;
    const int memfd = memfd_create("rdmad-hw", MFD_ALLOW_SEALING);
    ASSERT_GE(memfd, 0);
    ASSERT_EQ(ftruncate(memfd, kSize), 0);
    ASSERT_EQ(fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
    udmabuf_create create{static_cast<uint32_t>(memfd), UDMABUF_FLAGS_CLOEXEC, 0, kSize};
    const int buf_fd = ioctl(udmabuf, UDMABUF_CREATE, &create);
    ASSERT_GE(buf_fd, 0) << std::strerror(errno);
    auto mr = MemoryRegion::register_dmabuf(pd, 0, kSize, 0, buf_fd, IBV_ACCESS_LOCAL_WRITE);
    EXPECT_EQ(mr.ok(), probe.support == DmabufSupport::kSupported)
        << (mr.ok() ? std::string("registered") : mr.error().message());
    close(buf_fd);
    close(memfd);
  });
  if (udmabuf >= 0) close(udmabuf);
}

// Advertised capabilities must hold: an MR of max_mr_size is not attempted, but one of a few MiB is,
// and an imported context must be able to allocate a PD.
TEST_F(RdmaCoreHw, AdvertisedCapabilitiesWork) {
  for_each_device([&](size_t i, const Context& ctx, const ProtectionDomain& pd) {
    auto caps = query_caps(ctx, pd);
    ASSERT_TRUE(caps.ok()) << caps.error().message();
    std::printf("  %s: max_mr_size %llu, max_qp %u, dma-buf: %s, import: %s\n", infos_[i].name.c_str(),
                static_cast<unsigned long long>(caps->max_mr_size), caps->max_qp, caps->dmabuf.detail.c_str(),
                caps->import_detail.c_str());
    EXPECT_EQ(caps->phys_port_cnt, infos_[i].ports.size());
    constexpr size_t kBytes = 4 << 20;
    ASSERT_GE(caps->max_mr_size, kBytes);
    std::vector<uint8_t> buf(kBytes);
    EXPECT_TRUE(MemoryRegion::register_host(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE).ok());
    if (caps->import_context) {
      const int fd = dup(ctx.get()->cmd_fd);
      ASSERT_GE(fd, 0);
      ibv_context* imported = ibv_import_device(fd);
      ASSERT_NE(imported, nullptr);
      ibv_pd* ipd = ibv_alloc_pd(imported);
      EXPECT_NE(ipd, nullptr);
      if (ipd != nullptr) ibv_dealloc_pd(ipd);
      ibv_close_device(imported);
    }
  });
}

TEST_F(RdmaCoreHw, CountersAndCcParametersAreReadable) {
  for_each_active_port([&](ibv_device*, const DeviceInfo& info, const PortInfo& port) {
    if (root_.exists(nic_cc::port_dir(info.name, port.port) + "/counters")) {
      EXPECT_TRUE(nic_cc::read_port_counters(root_, info.name, port.port).ok());
    }
    if (root_.exists(nic_cc::port_dir(info.name, port.port) + "/hw_counters")) {
      auto hw = nic_cc::read_hw_counters(root_, info.name, port.port);
      ASSERT_TRUE(hw.ok());
      EXPECT_FALSE(hw->values.empty());
    }
    const auto where = nic_cc::locate_cc_params(root_, port.netdev, info.pci_address);
    if (!where) return;  // not mlx5, or debugfs not mounted / not readable
    const auto readout = nic_cc::read_cc_params(root_, *where);
    std::printf("  %s: %s\n", where->describe().c_str(), cc::describe(readout.params).c_str());
    EXPECT_GT(readout.readable_count(), 0u);
  });
}

}  // namespace
}  // namespace rdmad::verbs::rdma_core
