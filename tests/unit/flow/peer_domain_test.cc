// The protection-domain layout of a peer, on a recording transport (any backend sees exactly these
// calls, so this is the rdma_core layout too): one PD per NIC for the peer alone; exports and
// receives registered over exactly their range with exactly their access, device memory from its
// dma-buf at the right offset; a registration used by flows registered again with local access
// only, once per domain.
#include "peer_domain.h"
#include "rdmad/daemon/clients/registration_service.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include "support/doubles/soft_registrar.h"

namespace rdmad::flow {
namespace {

struct Call {
  int pd;
  bool dmabuf;
  uint64_t addr_or_offset;
  uint64_t length;
  uint64_t iova;
  int fd;
  uint32_t access;
};

struct Recorder {
  std::vector<Call> calls;
  int next_pd = 1;
  uint32_t next_key = 0x1000;
};

class FakeMr final : public verbs::MemoryRegion {
 public:
  FakeMr(uint64_t a, size_t l, uint32_t k, uint32_t acc) : a_(a), l_(l), k_(k), acc_(acc) {}
  uint64_t addr() const override { return a_; }
  size_t length() const override { return l_; }
  uint32_t lkey() const override { return k_; }
  uint32_t rkey() const override { return k_ + 1; }
  uint32_t access() const override { return acc_; }

 private:
  uint64_t a_;
  size_t l_;
  uint32_t k_, acc_;
};

class FakePd final : public verbs::ProtectionDomain {
 public:
  FakePd(Recorder& r, int id) : r_(r), id_(id) {}
  verbs::Result<std::unique_ptr<verbs::MemoryRegion>> reg_mr(void* addr, size_t len, uint32_t access) override {
    r_.calls.push_back({id_, false, reinterpret_cast<uint64_t>(addr), len, 0, -1, access});
    return std::unique_ptr<verbs::MemoryRegion>(new FakeMr(reinterpret_cast<uint64_t>(addr), len, r_.next_key += 2, access));
  }
  verbs::Result<std::unique_ptr<verbs::MemoryRegion>> reg_dmabuf_mr(int fd, uint64_t off, size_t len, uint64_t iova,
                                                                    uint32_t access) override {
    r_.calls.push_back({id_, true, off, len, iova, fd, access});
    return std::unique_ptr<verbs::MemoryRegion>(new FakeMr(iova, len, r_.next_key += 2, access));
  }
  verbs::Result<std::unique_ptr<verbs::QueuePair>> create_qp(const verbs::QpInitAttr&) override {
    return verbs::Status::not_supported("fake");
  }

 private:
  Recorder& r_;
  int id_;
};

class FakeDevice final : public verbs::Device {
 public:
  explicit FakeDevice(Recorder& r) : r_(r) { info_.name = "fake"; }
  const verbs::DeviceInfo& info() const override { return info_; }
  verbs::Result<verbs::PortInfo> query_port(uint8_t) const override { return verbs::PortInfo{}; }
  verbs::Result<std::unique_ptr<verbs::ProtectionDomain>> alloc_pd() override {
    return std::unique_ptr<verbs::ProtectionDomain>(new FakePd(r_, r_.next_pd++));
  }
  verbs::Result<std::unique_ptr<verbs::CompletionQueue>> create_cq(uint32_t) override {
    return verbs::Status::not_supported("fake");
  }
  verbs::NicCounters counters() const override { return {}; }

 private:
  Recorder& r_;
  verbs::DeviceInfo info_;
};

constexpr uint32_t kRemote = verbs::kAccessRemoteWrite | verbs::kAccessRemoteRead;

TEST(PeerDomain, EachPeerHasItsOwnPdsAndExportsCoverExactlyTheirRange) {
  Recorder rec;
  FakeDevice nic0(rec), nic1(rec);
  auto a = PeerDomain::open(1, {&nic0, &nic1});
  auto b = PeerDomain::open(2, {&nic0, &nic1});
  ASSERT_TRUE(a.ok() && b.ok());
  clients::PinnedRange r;
  r.kind = RDMAD_MEM_HOST;
  static uint8_t mem[8192];
  r.addr = mem + 100;
  r.iova = reinterpret_cast<uint64_t>(mem + 100);
  r.length = 4000;
  r.nic_count = 2;
  r.keys[0].nic_index = 0;
  r.keys[1].nic_index = 1;
  auto ea = a.value()->register_exact(r, RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_LOCAL_WRITE);
  auto eb = b.value()->register_exact(r, RDMAD_ACCESS_REMOTE_READ);
  ASSERT_TRUE(ea.ok() && eb.ok());
  ASSERT_EQ(rec.calls.size(), 4u);
  std::set<int> pds;
  for (const Call& c : rec.calls) {
    pds.insert(c.pd);
    EXPECT_FALSE(c.dmabuf);
    EXPECT_EQ(c.addr_or_offset, r.iova);
    EXPECT_EQ(c.length, 4000u);
  }
  EXPECT_EQ(pds.size(), 4u) << "two peers, two NICs: four protection domains";
  EXPECT_EQ(rec.calls[0].access, verbs::kAccessRemoteWrite | verbs::kAccessLocalWrite);
  EXPECT_EQ(rec.calls[2].access, verbs::kAccessRemoteRead);
  EXPECT_EQ(ea.value().keys.size(), 2u);
  EXPECT_NE(ea.value().keys[0].rkey, eb.value().keys[0].rkey);
}

TEST(PeerDomain, DeviceMemoryIsRegisteredFromItsDmabufAtTheRangesOffset) {
  Recorder rec;
  FakeDevice nic0(rec);
  auto d = PeerDomain::open(1, {&nic0});
  ASSERT_TRUE(d.ok());
  clients::PinnedRange r;
  r.kind = RDMAD_MEM_GPU;
  r.iova = 0x7f0000001000;
  r.length = 65536;
  r.dmabuf_fd = 42;
  r.dmabuf_offset = 0x3000;
  r.nic_count = 1;
  auto e = d.value()->register_exact(r, RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(e.ok());
  ASSERT_EQ(rec.calls.size(), 1u);
  EXPECT_TRUE(rec.calls[0].dmabuf);
  EXPECT_EQ(rec.calls[0].fd, 42);
  EXPECT_EQ(rec.calls[0].addr_or_offset, 0x3000u);
  EXPECT_EQ(rec.calls[0].length, 65536u);
  EXPECT_EQ(rec.calls[0].iova, 0x7f0000001000u);
}

TEST(PeerDomain, RegistrationsUsedByFlowsGetLocalAccessOnlyOncePerDomain) {
  Recorder rec;
  FakeDevice nic0(rec), nic1(rec);
  auto d = PeerDomain::open(7, {&nic0, &nic1});
  ASSERT_TRUE(d.ok());
  clients::IpcConfig config;
  clients::SoftRegistrar registrar(2);
  clients::StaticNicDirectory inventory({{"n0", "soft", "", RDMAD_LINK_UP, 1, 0}, {"n1", "soft", "", RDMAD_LINK_UP, 1, 0}});
  clients::RegistrationService svc(config, registrar, inventory, nullptr);
  int fd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(fd, 16384), 0);
  ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  const clients::Peer client{1, 1000, 1000, 1};
  const uint32_t all = RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ;
  auto reg = svc.register_host(client, fd, {0, 16384, all, 0});
  ASSERT_TRUE(reg.ok());
  auto pin = svc.pin(1, reg.value().handle, 4096, 100, 0);
  ASSERT_TRUE(pin.ok());
  auto k1 = d.value()->local_keys(svc, pin.value());
  auto k2 = d.value()->local_keys(svc, pin.value());
  ASSERT_TRUE(k1.ok() && k2.ok());
  EXPECT_EQ(k1.value(), k2.value());
  ASSERT_EQ(rec.calls.size(), 2u) << "made again for the same domain";
  for (const Call& c : rec.calls) {
    EXPECT_EQ(c.access & kRemote, 0u) << "a flow's view of a registration carried remote access";
    EXPECT_EQ(c.access, verbs::kAccessLocalWrite);
    EXPECT_EQ(c.length, 16384u) << "the whole registration";
  }
  EXPECT_NE(k1.value()[0], 0u);
  EXPECT_NE(k1.value()[1], 0u);
  svc.drop_domain(7);
  EXPECT_EQ(svc.attachment_count_for_test(7), 0u);
  svc.unpin(pin.value().pin);
  close(fd);
}

}  // namespace
}  // namespace rdmad::flow
