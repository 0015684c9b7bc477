// InfiniBand rails through the QP connector: ports described by the ib-hdr fixture tree (an HDR
// host: mlx5_0 ACTIVE with LID 0x1a, mlx5_1 DOWN), endpoints that carry the link and the LID over
// the wire, the peer's LID in the QP's address vector (and no GRH inside the subnet), a port that
// is not ACTIVE left without QPs, and RoCE and InfiniBand rails refused as a pair.
#include <gtest/gtest.h>

#include <map>

#include "rdmad/daemon/peer/qp_connector.h"
#include "port_selection.h"
#include "wr_mapping.h"
#include "unit/nic_cc/sysfs_fixture.h"

namespace rdmad::peer {
namespace {

namespace rc = verbs::rdma_core;

struct Modify {
  verbs::QpAttr attr;
  uint32_t mask;
};

class RecordingQp final : public verbs::QueuePair {
 public:
  RecordingQp(uint32_t qpn, std::vector<Modify>& log) : qpn_(qpn), log_(log) {}
  uint32_t qp_num() const override { return qpn_; }
  verbs::Status modify(const verbs::QpAttr& a, uint32_t mask) override {
    log_.push_back({a, mask});
    return verbs::Status::success();
  }
  verbs::QpAttr query() const override { return {}; }
  verbs::Status post_send(std::span<const verbs::SendWr>, size_t*) override { return verbs::Status::success(); }
  verbs::Status post_recv(std::span<const verbs::RecvWr>, size_t*) override { return verbs::Status::success(); }

 private:
  uint32_t qpn_;
  std::vector<Modify>& log_;
};

class RecordingPd final : public verbs::ProtectionDomain {
 public:
  RecordingPd(uint32_t& next_qpn, std::vector<Modify>& log) : next_qpn_(next_qpn), log_(log) {}
  verbs::Result<std::unique_ptr<verbs::MemoryRegion>> reg_mr(void*, size_t, uint32_t) override {
    return verbs::Status::not_supported("fixture");
  }
  verbs::Result<std::unique_ptr<verbs::MemoryRegion>> reg_dmabuf_mr(int, uint64_t, size_t, uint64_t,
                                                                    uint32_t) override {
    return verbs::Status::not_supported("fixture");
  }
  verbs::Result<std::unique_ptr<verbs::QueuePair>> create_qp(const verbs::QpInitAttr&) override {
    return std::unique_ptr<verbs::QueuePair>(new RecordingQp(next_qpn_++, log_));
  }

 private:
  uint32_t& next_qpn_;
  std::vector<Modify>& log_;
};

// A device whose port is what the rdma_core backend reads from a fixture tree's sysfs.
class FixtureDevice final : public verbs::Device {
 public:
  FixtureDevice(const std::string& tree, const std::string& name, std::optional<uint16_t> lid = std::nullopt)
      : root_(rdmad::testing::sysfs_fixture(tree)), sysfs_(rc::read_device_sysfs(root_, name)), lid_(lid) {
    info_.name = name;
  }
  const verbs::DeviceInfo& info() const override { return info_; }
  verbs::Result<verbs::PortInfo> query_port(uint8_t) const override {
    verbs::PortInfo p = rc::port_info_from_sysfs(root_, sysfs_, sysfs_.ports.at(0), rc::RdmaCoreConfig{});
    if (lid_) p.lid = *lid_;
    if (p.active_mtu_bytes == 0) p.active_mtu_bytes = 4096;  // sysfs has no IB MTU; ibv_query_port does
    return p;
  }
  verbs::Result<std::unique_ptr<verbs::ProtectionDomain>> alloc_pd() override {
    return std::unique_ptr<verbs::ProtectionDomain>(new RecordingPd(next_qpn_, modifies));
  }
  verbs::Result<std::unique_ptr<verbs::CompletionQueue>> create_cq(uint32_t) override {
    return verbs::Status::not_supported("fixture");
  }
  verbs::NicCounters counters() const override { return {}; }
  std::vector<Modify> modifies;

 private:
  nic_cc::SysfsRoot root_;
  rc::DeviceInfo sysfs_;
  std::optional<uint16_t> lid_;
  verbs::DeviceInfo info_;
  uint32_t next_qpn_ = 0x100;
};

struct Side {
  std::vector<std::unique_ptr<FixtureDevice>> devices;
  std::vector<std::unique_ptr<verbs::ProtectionDomain>> pds;
  std::unique_ptr<QpConnector> qps;
  void add(std::unique_ptr<FixtureDevice> d) {
    auto pd = d->alloc_pd();
    pds.push_back(std::move(pd.value()));
    devices.push_back(std::move(d));
  }
  void finish() {
    std::vector<LocalNic> nics;
    for (size_t i = 0; i < devices.size(); ++i) {
      LocalNic n;
      n.name = devices[i]->info().name;
      n.device = devices[i].get();
      n.pd = pds[i].get();
      nics.push_back(n);
    }
    qps = std::make_unique<QpConnector>(std::move(nics), QpConnectorOptions{});
  }
};

// What went over the wire, decoded again.
std::vector<NicEndpoint> through_the_wire(const std::vector<NicEndpoint>& eps) {
  Endpoints m;
  m.endpoints = eps;
  auto d = decode_endpoints(encode(m));
  EXPECT_TRUE(d.has_value());
  return d ? d->endpoints : std::vector<NicEndpoint>{};
}

TEST(QpConnectorInfiniband, EndpointsCarryTheLidAndTheQpIsAddressedByIt) {
  Side a, b;
  a.add(std::make_unique<FixtureDevice>("ib-hdr", "mlx5_0"));
  a.add(std::make_unique<FixtureDevice>("ib-hdr", "mlx5_1"));  // port DOWN
  a.finish();
  b.add(std::make_unique<FixtureDevice>("ib-hdr", "mlx5_0", uint16_t{0x2b}));
  b.finish();

  auto offer = a.qps->prepare();
  ASSERT_TRUE(offer.ok()) << offer.status().message();
  ASSERT_EQ(offer.value().size(), 1u) << "the DOWN port gets no QPs";
  ASSERT_EQ(a.qps->left_out().size(), 1u);
  EXPECT_NE(a.qps->left_out()[0].find("mlx5_1: port 1 is DOWN"), std::string::npos) << a.qps->left_out()[0];
  const NicEndpoint& e = offer.value()[0];
  EXPECT_EQ(e.link, EndpointLink::kInfiniband);
  EXPECT_EQ(e.lid, 0x1a);
  EXPECT_EQ(e.gid.to_ip_string(), "fe80::b83f:d203:12:3450") << "the port GID (index 0)";

  auto answer = b.qps->prepare();
  ASSERT_TRUE(answer.ok());
  ASSERT_TRUE(b.qps->connect(through_the_wire(offer.value())).ok());
  ASSERT_TRUE(a.qps->connect(through_the_wire(answer.value())).ok());

  // B's QP went to RTR addressed by A's LID, and the backend builds an LID-only address vector
  // (same subnet prefix fe80::) with the NIC's SL.
  const auto& log = b.devices[0]->modifies;
  const auto rtr = std::find_if(log.begin(), log.end(), [](const Modify& m) { return m.attr.state == verbs::QpState::kRtr; });
  ASSERT_NE(rtr, log.end());
  EXPECT_TRUE(rtr->mask & verbs::kQpAv);
  EXPECT_EQ(rtr->attr.dest_lid, 0x1a);
  EXPECT_EQ(rtr->attr.dest_qp_num, e.qpn);
  rc::PathConfig path;
  path.roce = false;
  path.dlid = rtr->attr.dest_lid;
  path.sl = 4;
  path.sgid = b.devices[0]->query_port(1).value().gid.raw;
  const auto t = rc::to_ibv_qp_attr(rtr->attr, rtr->mask, path);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->attr.ah_attr.dlid, 0x1a);
  EXPECT_EQ(t->attr.ah_attr.sl, 4);
  EXPECT_EQ(t->attr.ah_attr.is_global, 0);
  // And A's toward B's LID.
  const auto& alog = a.devices[0]->modifies;
  const auto artr = std::find_if(alog.begin(), alog.end(), [](const Modify& m) { return m.attr.state == verbs::QpState::kRtr; });
  ASSERT_NE(artr, alog.end());
  EXPECT_EQ(artr->attr.dest_lid, 0x2b);
}

TEST(QpConnectorInfiniband, RoceAndInfinibandRailsDoNotPair) {
  Side ib, roce;
  ib.add(std::make_unique<FixtureDevice>("ib-hdr", "mlx5_0"));
  ib.finish();
  roce.add(std::make_unique<FixtureDevice>("roce-cx6dx", "mlx5_0"));
  roce.finish();
  auto offer = roce.qps->prepare();
  ASSERT_TRUE(offer.ok()) << offer.status().message();
  EXPECT_EQ(offer.value()[0].link, EndpointLink::kRoce);
  EXPECT_EQ(offer.value()[0].lid, 0);
  ASSERT_TRUE(ib.qps->prepare().ok());
  const verbs::Status st = ib.qps->connect(through_the_wire(offer.value()));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("this end is InfiniBand"), std::string::npos) << st.message();
}

TEST(QpConnectorInfiniband, AnInfinibandPortWithoutALidIsNotOffered) {
  Side a;
  a.add(std::make_unique<FixtureDevice>("ib-hdr", "mlx5_0", uint16_t{0}));
  a.finish();
  auto eps = a.qps->prepare();
  ASSERT_FALSE(eps.ok());
  EXPECT_NE(eps.status().message().find("no unicast LID"), std::string::npos) << eps.status().message();
}

}  // namespace
}  // namespace rdmad::peer
