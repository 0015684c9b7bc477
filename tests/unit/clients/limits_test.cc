// What one local user can make the client service hold: connections per uid, connections that
// never say hello or sit idle holding nothing, the file-descriptor budget, and a uid's share of a
// NIC's memory-region table.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "raw_client.h"
#include "rdmad/daemon/clients/fd_budget.h"
#include "server_fixture.h"

namespace rdmad::clients {
namespace {

using test::RawClient;
using test::TestServer;
using test::eventually;

TEST(IpcLimits, ConnectionsBeyondAUidsQuotaAreRefusedWithAReason) {
  TestServer srv([](IpcConfig& c) { c.default_quota.max_connections = 3; });
  std::vector<std::unique_ptr<RawClient>> mine;
  for (int i = 0; i < 3; ++i) {
    mine.push_back(std::make_unique<RawClient>(srv.path()));
    ASSERT_TRUE(mine.back()->hello()) << i;
  }
  RawClient fourth(srv.path());
  auto r = fourth.receive();  // refused at once, with the reason
  EXPECT_EQ(r.status(), RDMAD_ERR_QUOTA);
  EXPECT_NE(r.message().find("connection quota"), std::string::npos) << r.message();
  EXPECT_TRUE(fourth.receive().closed);
  // One goes, one more may come.
  mine.pop_back();
  EXPECT_TRUE(eventually([&] { return srv.client_count() == 2; }));
  RawClient again(srv.path());
  EXPECT_TRUE(again.hello());
}

TEST(IpcLimits, AConnectionThatNeverSaysHelloIsClosed) {
  TestServer srv([](IpcConfig& c) { c.hello_timeout_ms = 50; });
  RawClient silent(srv.path());
  ASSERT_TRUE(eventually([&] { return srv.client_count() == 1; }));
  EXPECT_TRUE(silent.receive().closed);
  EXPECT_TRUE(eventually([&] { return srv.client_count() == 0; }));
  // A client that says hello in time stays.
  RawClient polite(srv.path());
  ASSERT_TRUE(polite.hello());
  EXPECT_FALSE(eventually([&] { return srv.client_count() == 0; }, std::chrono::milliseconds(200)));
}

TEST(IpcLimits, AnIdleConnectionHoldingNothingIsClosedOneHoldingARegistrationIsNot) {
  TestServer srv([](IpcConfig& c) {
    c.hello_timeout_ms = 20;
    c.idle_timeout_ms = 100;
  });
  RawClient idle(srv.path());
  ASSERT_TRUE(idle.hello());
  rdmad_client* holder = nullptr;
  ASSERT_EQ(rdmad_connect(srv.path().c_str(), &holder), RDMAD_OK);
  rdmad_host_buffer buf;
  ASSERT_EQ(rdmad_alloc_host(4096, &buf), RDMAD_OK);
  rdmad_mr* mr = nullptr;
  ASSERT_EQ(rdmad_register_host(holder, buf.fd, 0, 4096, RDMAD_ACCESS_LOCAL_WRITE, 0, &mr), RDMAD_OK);
  EXPECT_TRUE(idle.receive().closed) << "the idle connection was kept";
  EXPECT_TRUE(eventually([&] { return srv.client_count() == 1; }));
  EXPECT_FALSE(eventually([&] { return srv.client_count() == 0; }, std::chrono::milliseconds(300)))
      << "a connection holding a registration was closed as idle";
  EXPECT_EQ(srv.handle_count(), 1u);
  rdmad_deregister(holder, mr);
  rdmad_free_host(&buf);
  rdmad_disconnect(holder);
}

TEST(FdBudget, TakesUntilTheReserveAndGivesBack) {
  FdBudget b(10, 4);
  EXPECT_EQ(b.total(), 6u);
  EXPECT_TRUE(b.take(3));
  EXPECT_TRUE(b.take(3));
  EXPECT_FALSE(b.take(1));
  b.give(3);
  EXPECT_FALSE(b.take(4));
  EXPECT_TRUE(b.take(3));
  EXPECT_EQ(b.available(), 0u);
  EXPECT_EQ(FdBudget(3, 4).total(), 0u);
}

TEST(FdBudget, RaisesTheSoftLimitToTheHardOne) {
  rlimit lim{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  const rlimit saved = lim;
  if (lim.rlim_max <= 64) GTEST_SKIP() << "hard RLIMIT_NOFILE " << lim.rlim_max << ": no room to lower the soft one";
  lim.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);
  EXPECT_EQ(FdBudget::raise_fd_limit(), lim.rlim_max == RLIM_INFINITY ? uint64_t{1} << 20 : lim.rlim_max);
  rlimit now{};
  getrlimit(RLIMIT_NOFILE, &now);
  EXPECT_EQ(now.rlim_cur, lim.rlim_max);
  setrlimit(RLIMIT_NOFILE, &saved);
}

TEST(IpcLimits, MaxClientsIsLoweredToWhatTheFdLimitAllows) {
  // In a child: a lowered hard limit cannot be raised again.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    rlimit lim{kFdReserve + 5, kFdReserve + 5};  // the server raises the soft limit to the hard one
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) _exit(2);
    TestServer srv([](IpcConfig& c) { c.max_clients = 100000; });
    const bool ok = srv.server().config().max_clients == 5 && srv.server().fd_budget().total() == 5;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "max_clients was not lowered to the descriptors left after the reserve";
}

// A registrar whose NICs hold 40 memory regions.
class SmallTable final : public MemoryRegistrar {
 public:
  Result<MemoryRegion> register_host(void*, uint64_t, uint32_t, uint32_t) override { return MemoryRegion{next_++, {{0, 1, 1}}}; }
  Result<MemoryRegion> register_dmabuf(int, uint64_t, uint64_t, uint64_t, uint32_t, uint32_t) override {
    return Error{RDMAD_ERR_NOT_SUPPORTED, "no"};
  }
  void deregister(uint64_t) override {}
  DmabufSupport probe_dmabuf(uint32_t) override { return {}; }
  std::string backend_name() const override { return "small"; }
  uint64_t mr_capacity() const override { return 40; }

 private:
  uint64_t next_ = 1;
};

TEST(IpcLimits, OneUidFillsOnlyItsShareOfTheNicsTable) {
  IpcConfig config;
  config.nic_table_share_percent = 25;
  SmallTable registrar;
  StaticNicDirectory inventory{test::soft_nics()};
  RegistrationService svc(config, registrar, inventory, nullptr);
  int fd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(fd, 64 * 4096), 0);
  ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  const Peer greedy{1, 1000, 1000, 1};
  const Peer other{2, 2000, 2000, 2};
  int got = 0;
  for (uint64_t i = 0; i < 20; ++i) got += svc.register_host(greedy, fd, {i * 4096, 4096, RDMAD_ACCESS_LOCAL_WRITE, 0}).ok();
  EXPECT_EQ(got, 10);  // 25 % of 40, though its registration quota is 4096
  auto refused = svc.register_host(greedy, fd, {30 * 4096, 4096, RDMAD_ACCESS_LOCAL_WRITE, 0});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().status, RDMAD_ERR_QUOTA);
  EXPECT_NE(refused.error().message.find("nic_table_share_percent"), std::string::npos);
  // Another user still registers.
  EXPECT_TRUE(svc.register_host(other, fd, {40 * 4096, 4096, RDMAD_ACCESS_LOCAL_WRITE, 0}).ok());
  close(fd);
}

}  // namespace
}  // namespace rdmad::clients
