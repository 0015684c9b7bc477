// The registration table alone: range checks, quotas, deduplication, ownership, release.
#include "rdmad/daemon/clients/registration_service.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <set>

#include "rdmad/daemon/clients/dmabuf.h"
#include "support/doubles/soft_registrar.h"
#include "server_fixture.h"

namespace rdmad::clients {
namespace {

int sealed_memfd(size_t bytes, bool seal = true) {
  int fd = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
  if (seal) {
    EXPECT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  }
  return fd;
}

constexpr uint32_t kRw = RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ;

class RegistrationServiceTest : public ::testing::Test {
 protected:
  IpcConfig config_;
  SoftRegistrar registrar_{2};
  StaticNicDirectory inventory_{test::soft_nics()};
  Peer a_{1, 1000, 1000, 11};
  Peer b_{2, 1000, 1000, 12};  // same uid, other connection
  Peer c_{3, 2000, 2000, 13};  // other uid
};

TEST_F(RegistrationServiceTest, MapsTheRequestedRangeByteExact) {
  RegistrationService svc(config_, registrar_, inventory_, nullptr);
  int fd = sealed_memfd(3 * 4096);
  auto* mem = static_cast<unsigned char*>(mmap(nullptr, 3 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  for (size_t i = 0; i < 3 * 4096; ++i) mem[i] = static_cast<unsigned char>(i * 7 + 3);
  auto r = svc.register_host(a_, fd, proto::RegisterHostRequest{4096 + 100, 5000, kRw, 0});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().keys.size(), 2u);
  EXPECT_NE(r.value().keys[0].lkey, r.value().keys[1].lkey);
  auto region = registrar_.region_for_test(svc.mr_id_for_test(r.value().handle));
  ASSERT_EQ(region.size(), 5000u);
  EXPECT_EQ(std::memcmp(region.data(), mem + 4096 + 100, 5000), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(region.data()), r.value().iova);
  EXPECT_EQ(svc.usage(a_.tenant()).pinned_bytes, 2 * 4096u);  // [4096, 12288) page-rounded
  munmap(mem, 3 * 4096);
  close(fd);
}

// Whether the page holding `addr` is mapped in this process's page table (/proc/self/pagemap,
// bit 63: present). -1 when the kernel does not tell.
int page_present(const void* addr) {
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t entry = 0;
  const ssize_t n = pread(fd, &entry, sizeof entry,
                          static_cast<off_t>(reinterpret_cast<uintptr_t>(addr) / page * sizeof entry));
  close(fd);
  if (n != static_cast<ssize_t>(sizeof entry)) return -1;
  return static_cast<int>(entry >> 63);
}

// Registration (of 1 MiB and more) maps the pages the memfd already holds, so a soft NIC's
// datapath takes no page faults on them at the first transfer, and leaves holes alone: populating
// them would allocate the client's memory in the daemon (and charge the daemon's memory cgroup).
TEST_F(RegistrationServiceTest, MapsThePagesTheFileHoldsAndAllocatesNoHoles) {
  RegistrationService svc(config_, registrar_, inventory_, nullptr);
  constexpr size_t kPages = 256;  // 1 MiB
  int fd = sealed_memfd(kPages * 4096);
  auto* mem = static_cast<unsigned char*>(mmap(nullptr, kPages * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  const std::set<size_t> written = {0, 1, 2, 5, 100, 101, 255};  // every other page stays a hole
  for (size_t p : written) mem[p * 4096 + 17] = 1;
  struct stat before {};
  ASSERT_EQ(fstat(fd, &before), 0);
  auto r = svc.register_host(a_, fd, proto::RegisterHostRequest{0, kPages * 4096, kRw, 0});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto* base = reinterpret_cast<const unsigned char*>(r.value().iova);
  if (page_present(base) < 0) GTEST_SKIP() << "/proc/self/pagemap is not readable here";
  for (size_t p = 0; p < kPages; ++p) {
    EXPECT_EQ(page_present(base + p * 4096), written.count(p) ? 1 : 0) << "page " << p;
  }
  struct stat after {};
  ASSERT_EQ(fstat(fd, &after), 0);
  EXPECT_EQ(after.st_blocks, before.st_blocks) << "registration allocated pages of the file";
  munmap(mem, kPages * 4096);
  close(fd);
}

TEST_F(RegistrationServiceTest, RejectsBadRangesAndFiles) {
  RegistrationService svc(config_, registrar_, inventory_, nullptr);
  int fd = sealed_memfd(8192);
  int unsealed = sealed_memfd(8192, false);
  int pipes[2];
  ASSERT_EQ(pipe(pipes), 0);
  struct Case {
    int fd;
    proto::RegisterHostRequest req;
    const char* needle;
  } cases[] = {
      {fd, {0, 0, kRw, 0}, "zero length"},
      {fd, {~uint64_t{0} - 10, 100, kRw, 0}, "overflows"},
      {fd, {4096, 8192, kRw, 0}, "beyond the file"},
      {fd, {0, 4096, 1u << 7, 0}, "access flags"},
      {fd, {0, 4096, RDMAD_ACCESS_REMOTE_WRITE, 0}, "access flags"},
      {fd, {0, 4096, kRw, 0x4}, "nic_mask"},
      {unsealed, {0, 4096, kRw, 0}, "F_SEAL_SHRINK"},
      {pipes[0], {0, 4096, kRw, 0}, "not a memfd"},
  };
  for (const auto& c : cases) {
    auto r = svc.register_host(a_, c.fd, c.req);
    ASSERT_FALSE(r.ok()) << c.needle;
    EXPECT_EQ(r.error().status, RDMAD_ERR_INVALID_ARGUMENT) << c.needle;
    EXPECT_NE(r.error().message.find(c.needle), std::string::npos) << r.error().message;
  }
  EXPECT_EQ(svc.region_count(), 0u);
  EXPECT_EQ(registrar_.live_regions(), 0u);
  close(fd), close(unsealed), close(pipes[0]), close(pipes[1]);
}

TEST_F(RegistrationServiceTest, QuotasRefuseAndLeaveNothingBehind) {
  config_.quotas[a_.uid] = Quota{16384, 2};
  RegistrationService svc(config_, registrar_, inventory_, nullptr);
  int fd = sealed_memfd(65536);
  auto big = svc.register_host(a_, fd, {0, 20000, kRw, 0});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().status, RDMAD_ERR_QUOTA);
  EXPECT_NE(big.error().message.find("pinned-bytes quota of uid 1000"), std::string::npos)
      << big.error().message;
  EXPECT_EQ(svc.usage(a_.tenant()).pinned_bytes, 0u);
  EXPECT_EQ(svc.usage(a_.tenant()).registrations, 0u);
  EXPECT_EQ(registrar_.live_regions(), 0u);
  ASSERT_TRUE(svc.register_host(a_, fd, {0, 4096, kRw, 0}).ok());
  ASSERT_TRUE(svc.register_host(a_, fd, {4096, 4096, kRw, 0}).ok());
  auto third = svc.register_host(a_, fd, {8192, 4096, kRw, 0});
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.error().status, RDMAD_ERR_QUOTA);
  EXPECT_NE(third.error().message.find("registration-count quota"), std::string::npos);
  EXPECT_EQ(svc.usage(a_.tenant()).registrations, 2u);
  EXPECT_EQ(svc.usage(a_.tenant()).pinned_bytes, 8192u);
  EXPECT_EQ(registrar_.live_regions(), 2u);
  // Another uid has its own (default) quota.
  EXPECT_TRUE(svc.register_host(c_, fd, {8192, 4096, kRw, 0}).ok());
  close(fd);
}

TEST_F(RegistrationServiceTest, DeduplicatesPerUidAndRefcounts) {
  RegistrationService svc(config_, registrar_, inventory_, nullptr);
  int fd = sealed_memfd(65536);
  int other_fd = dup(fd);  // same file identity through another descriptor
  auto r1 = svc.register_host(a_, fd, {0, 65536, kRw, 0});
  auto r2 = svc.register_host(b_, other_fd, {0, 65536, kRw, 0});
  auto r3 = svc.register_host(c_, fd, {0, 65536, kRw, 0});
  ASSERT_TRUE(r1.ok() && r2.ok() && r3.ok());
  EXPECT_FALSE(r1.value().shared);
  EXPECT_TRUE(r2.value().shared);
  EXPECT_FALSE(r3.value().shared);  // never shared across uids
  EXPECT_EQ(r1.value().keys[0].rkey, r2.value().keys[0].rkey);
  EXPECT_NE(r1.value().handle, r2.value().handle);
  EXPECT_EQ(svc.region_count(), 2u);
  EXPECT_EQ(svc.usage(a_.tenant()).pinned_bytes, 65536u);  // charged once
  EXPECT_EQ(svc.usage(a_.tenant()).registrations, 2u);
  ASSERT_TRUE(svc.deregister(a_, r1.value().handle).ok());
  EXPECT_EQ(svc.region_count(), 2u);  // b still holds it
  ASSERT_TRUE(svc.deregister(b_, r2.value().handle).ok());
  EXPECT_EQ(svc.region_count(), 1u);
  EXPECT_EQ(svc.usage(a_.tenant()).pinned_bytes, 0u);
  close(fd), close(other_fd);
}

TEST_F(RegistrationServiceTest, HandlesBelongToTheirConnection) {
  RegistrationService svc(config_, registrar_, inventory_, nullptr);
  int fd = sealed_memfd(4096);
  auto r = svc.register_host(a_, fd, {0, 4096, kRw, 0});
  ASSERT_TRUE(r.ok());
  for (const Peer& other : {b_, c_}) {
    auto d = svc.deregister(other, r.value().handle);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.error().status, RDMAD_ERR_PERMISSION);
  }
  EXPECT_EQ(svc.deregister(a_, 999).error().status, RDMAD_ERR_NOT_FOUND);
  bool more = true;
  EXPECT_TRUE(svc.list(b_.conn_id, 0, 64, &more).empty());
  EXPECT_EQ(svc.list(a_.conn_id, 0, 64, &more).size(), 1u);
  EXPECT_TRUE(svc.deregister(a_, r.value().handle).ok());
  close(fd);
}

TEST_F(RegistrationServiceTest, ReleaseConnectionDropsEverythingAndListPages) {
  RegistrationService svc(config_, registrar_, inventory_, nullptr);
  int fd = sealed_memfd(100 * 4096);
  for (uint64_t i = 0; i < 100; ++i) ASSERT_TRUE(svc.register_host(a_, fd, {i * 4096, 4096, kRw, 0}).ok());
  bool more = false;
  auto page1 = svc.list(a_.conn_id, 0, 64, &more);
  ASSERT_EQ(page1.size(), 64u);
  EXPECT_TRUE(more);
  auto page2 = svc.list(a_.conn_id, page1.back().handle, 64, &more);
  EXPECT_EQ(page2.size(), 36u);
  EXPECT_FALSE(more);
  svc.release_connection(a_.conn_id);
  EXPECT_EQ(svc.region_count(), 0u);
  EXPECT_EQ(svc.handle_count(), 0u);
  EXPECT_EQ(registrar_.live_regions(), 0u);
  EXPECT_EQ(svc.usage(a_.tenant()).pinned_bytes, 0u);
  close(fd);
}

TEST_F(RegistrationServiceTest, DmabufChecksTheFdAndSoftRefusesWithReason) {
  RegistrationService svc(config_, registrar_, inventory_, nullptr);
  int fd = sealed_memfd(4096);
  auto r = svc.register_dmabuf(a_, fd, {0, 4096, 0x10000, kRw, 0, {}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("not a dma-buf"), std::string::npos) << r.error().message;
  auto soft = registrar_.register_dmabuf(fd, 0, 4096, 0x10000, kRw, 0);
  ASSERT_FALSE(soft.ok());
  EXPECT_EQ(soft.error().status, RDMAD_ERR_NOT_SUPPORTED);
  EXPECT_EQ(soft.error().message.rfind("not supported by backend soft: ", 0), 0u) << soft.error().message;
  EXPECT_TRUE(is_dmabuf_link("anon_inode:dmabuf"));
  EXPECT_TRUE(is_dmabuf_link("/dmabuf:nvidia"));
  EXPECT_FALSE(is_dmabuf_link("/memfd:test (deleted)"));
  EXPECT_FALSE(is_dmabuf_link("anon_inode:[eventfd]"));
  close(fd);
}

}  // namespace
}  // namespace rdmad::clients

namespace rdmad::clients {
namespace {

// Records the access every registration asks the NICs for.
class RecordingRegistrar final : public MemoryRegistrar {
 public:
  Result<MemoryRegion> register_host(void*, uint64_t, uint32_t access, uint32_t) override {
    accesses.push_back(access);
    return MemoryRegion{next_++, {{0, 0x10, 0x11}}};
  }
  Result<MemoryRegion> register_dmabuf(int, uint64_t, uint64_t, uint64_t, uint32_t access, uint32_t) override {
    accesses.push_back(access);
    return MemoryRegion{next_++, {{0, 0x20, 0x21}}};
  }
  void deregister(uint64_t) override {}
  DmabufSupport probe_dmabuf(uint32_t) override { return {}; }
  std::string backend_name() const override { return "recording"; }
  std::vector<uint32_t> accesses;

 private:
  uint64_t next_ = 1;
};

// A client registration is for local use only: whatever remote rights the client names (what it
// may export), the NICs get local access, so its keys are worthless to a peer.
TEST(RegistrationAccess, RegistrationsCarryLocalAccessOnly) {
  IpcConfig config;
  RecordingRegistrar registrar;
  StaticNicDirectory inventory{test::soft_nics()};
  RegistrationService svc(config, registrar, inventory, nullptr);
  const Peer p{1, 1000, 1000, 11};
  int fd = sealed_memfd(4 * 4096);
  const uint32_t asks[] = {kRw, RDMAD_ACCESS_REMOTE_READ, RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE,
                           RDMAD_ACCESS_LOCAL_WRITE, 0};
  for (uint32_t i = 0; i < std::size(asks); ++i) {
    auto r = svc.register_host(p, fd, proto::RegisterHostRequest{i * 100, 100, asks[i], 0});
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  ASSERT_EQ(registrar.accesses.size(), std::size(asks));
  for (uint32_t i = 0; i < std::size(asks); ++i) {
    EXPECT_EQ(registrar.accesses[i] & (RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ | RDMAD_ACCESS_REMOTE_ATOMIC), 0u)
        << "registration " << i << " was given remote access";
    const bool writes = (asks[i] & (RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE)) != 0;
    EXPECT_EQ(registrar.accesses[i], writes ? uint32_t{RDMAD_ACCESS_LOCAL_WRITE} : 0u) << i;
  }
  // The rights the client asked for still decide what it may use the registration for.
  auto r = svc.register_host(p, fd, proto::RegisterHostRequest{8192, 100, RDMAD_ACCESS_REMOTE_READ, 0});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(svc.pin(p.conn_id, r.value().handle, 0, 100, RDMAD_ACCESS_REMOTE_WRITE).ok());
  auto pinned = svc.pin(p.conn_id, r.value().handle, 0, 100, RDMAD_ACCESS_REMOTE_READ);
  ASSERT_TRUE(pinned.ok());
  svc.unpin(pinned.value().pin);
  close(fd);
}

// What a peer domain keeps with a registration: made once per domain, handed the registration's
// own range and rights, gone with the domain, and gone before the memory is unmapped.
struct Probe final : RegionAttachment {
  Probe(int* a, const void* at, bool* m) : alive(a), addr(at), mapped_at_death(m) { ++*alive; }
  ~Probe() override {
    --*alive;
    // Still mapped? mincore fails with ENOMEM on an unmapped range.
    unsigned char vec = 0;
    *mapped_at_death = mincore(const_cast<void*>(reinterpret_cast<const void*>(
                                   reinterpret_cast<uintptr_t>(addr) & ~uintptr_t{4095})),
                               4096, &vec) == 0;
  }
  int* alive;
  const void* addr;
  bool* mapped_at_death;
};

TEST_F(RegistrationServiceTest, AttachmentsAreMadeOncePerDomainAndGoWithTheDomainOrBeforeTheUnmap) {
  RegistrationService svc(config_, registrar_, inventory_, nullptr);
  int fd = sealed_memfd(4 * 4096);
  auto r = svc.register_host(a_, fd, proto::RegisterHostRequest{4096 + 8, 5000, kRw, 0});
  ASSERT_TRUE(r.ok());
  int alive = 0;
  bool mapped = false;
  int made = 0;
  RegionView seen;
  auto make = [&](const RegionView& v) -> Result<std::unique_ptr<RegionAttachment>> {
    ++made;
    seen = v;
    return std::unique_ptr<RegionAttachment>(std::make_unique<Probe>(&alive, v.addr, &mapped));
  };
  auto pin = svc.pin(a_.conn_id, r.value().handle, 100, 200, 0);
  ASSERT_TRUE(pin.ok());
  auto first = svc.attachment(pin.value().pin, 7, make);
  auto again = svc.attachment(pin.value().pin, 7, make);
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(first.value(), again.value());
  EXPECT_EQ(made, 1);
  // The whole registration, not the pinned slice; the rights the client asked for.
  EXPECT_EQ(seen.length, 5000u);
  EXPECT_EQ(seen.iova, r.value().iova);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(seen.addr), r.value().iova);
  EXPECT_EQ(seen.access, kRw);
  EXPECT_EQ(seen.nics, (std::vector<uint32_t>{0, 1}));
  ASSERT_TRUE(svc.attachment(pin.value().pin, 8, make).ok());
  EXPECT_EQ(alive, 2);
  svc.drop_domain(7);
  EXPECT_EQ(alive, 1);
  EXPECT_EQ(svc.attachment_count_for_test(7), 0u);
  EXPECT_EQ(svc.attachment_count_for_test(8), 1u);
  // A failed make leaves nothing behind and says why.
  auto failed = svc.attachment(pin.value().pin, 9, [](const RegionView&) -> Result<std::unique_ptr<RegionAttachment>> {
    return Error{RDMAD_ERR_NO_RESOURCE, "table full"};
  });
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().status, RDMAD_ERR_NO_RESOURCE);
  EXPECT_EQ(svc.attachment_count_for_test(9), 0u);
  // Deregistered while pinned: the attachment lives on with the pin, then goes before the unmap.
  ASSERT_TRUE(svc.deregister(a_, r.value().handle).ok());
  EXPECT_EQ(alive, 1);
  svc.unpin(pin.value().pin);
  svc.reap();
  EXPECT_EQ(alive, 0);
  EXPECT_TRUE(mapped) << "the attachment outlived the mapping";
  close(fd);
}

// The flows' pins have a lock of their own: unpin(), attachment() and reap() go on while the ipc
// workers hold the table's (a slow list, a burst of registrations), so the flow engine never waits
// behind them.
TEST_F(RegistrationServiceTest, PinsDoNotWaitForTheTableLock) {
  RegistrationService svc(config_, registrar_, inventory_, nullptr);
  int fd = sealed_memfd(4096);
  auto r = svc.register_host(a_, fd, proto::RegisterHostRequest{0, 4096, kRw, 0});
  ASSERT_TRUE(r.ok());
  auto pin = svc.pin(a_.conn_id, r.value().handle, 0, 100, 0);
  auto second = svc.pin(a_.conn_id, r.value().handle, 0, 100, 0);
  ASSERT_TRUE(pin.ok() && second.ok());
  int alive = 0;
  bool mapped = false;
  auto make = [&](const RegionView& v) -> Result<std::unique_ptr<RegionAttachment>> {
    return std::unique_ptr<RegionAttachment>(std::make_unique<Probe>(&alive, v.addr, &mapped));
  };
  std::future<bool> done;
  {
    auto table = svc.lock_table_for_test();
    done = std::async(std::launch::async, [&] {
      const bool attached = svc.attachment(pin.value().pin, 7, make).ok();
      svc.unpin(second.value().pin);
      svc.reap();
      return attached;
    });
    const bool finished = done.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
    EXPECT_TRUE(finished) << "the pins waited for the table's lock";
  }
  EXPECT_TRUE(done.get());
  EXPECT_EQ(alive, 1);
  svc.unpin(pin.value().pin);
  ASSERT_TRUE(svc.deregister(a_, r.value().handle).ok());
  EXPECT_EQ(alive, 0);
  close(fd);
}

}  // namespace
}  // namespace rdmad::clients
