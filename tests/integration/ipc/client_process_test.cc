// Client processes against the in-process server: a SIGKILLed client is cleaned up completely
// within a second, and a client running as another uid is refused or kept from others' handles.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "rdmad/rdmad.h"
#include "unit/clients/server_fixture.h"

extern char** environ;

namespace rdmad::test {
namespace {

const std::string kHelper = std::string(RDMAD_BINARY_DIR) + "/tests/integration/ipc/ipc_test_client";

// Spawns the helper with stdout on a pipe; returns its pid and the read end.
pid_t spawn_helper(std::vector<std::string> args, int* out_fd) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  args.insert(args.begin(), kHelper);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, kHelper.c_str(), &fa, nullptr, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  close(p[1]);
  *out_fd = p[0];
  return pid;
}

std::string read_line(int fd) {
  std::string line;
  char ch;
  while (read(fd, &ch, 1) == 1 && ch != '\n') line += ch;
  return line;
}

TEST(IpcClientProcess, SigkillMidRegistrationReleasesEverythingWithinASecond) {
  TestServer srv;
  ASSERT_TRUE(srv.started()) << srv.start_error();
  // Settle the server's own fds (listener, epoll) before taking the baseline.
  rdmad_client* warm = nullptr;
  ASSERT_EQ(rdmad_connect(srv.path().c_str(), &warm), RDMAD_OK);
  rdmad_disconnect(warm);
  ASSERT_TRUE(eventually([&] { return srv.client_count() == 0; }));
  size_t fds_before = open_fd_count();
  for (int round = 0; round < 3; ++round) {
    int out = -1;
    pid_t pid = spawn_helper({"churn", srv.path()}, &out);
    ASSERT_GT(pid, 0);
    ASSERT_EQ(read_line(out), "ready");
    close(out);
    // Let it get into the register/deregister loop, then kill it wherever it is.
    ASSERT_TRUE(eventually([&] { return srv.handle_count() > 28; }, std::chrono::seconds(5)));
    ASSERT_GT(srv.metric("rdmad_registered_bytes", {{"kind", "host"}}), double(8u << 20));
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(status));
    auto killed = std::chrono::steady_clock::now();
    EXPECT_TRUE(eventually([&] {
      return srv.region_count() == 0 && srv.client_count() == 0 && open_fd_count() == fds_before &&
             srv.metric("rdmad_registered_bytes", {{"kind", "host"}}) == 0 &&
             srv.metric("rdmad_registrations", {{"kind", "host"}}) == 0 &&
             srv.registrar().live_regions() == 0;
    }));
    EXPECT_LT(std::chrono::steady_clock::now() - killed, std::chrono::seconds(1));
    EXPECT_EQ(srv.metric("rdmad_clients_connected"), 0.0);
  }
}

std::string run_as_nobody(const TestServer& srv, uint64_t handle) {
  int out = -1;
  pid_t pid = spawn_helper({"as-nobody", srv.path(), std::to_string(handle)}, &out);
  if (pid <= 0) return "spawn failed";
  std::string line = read_line(out);
  close(out);
  int status = 0;
  waitpid(pid, &status, 0);
  return line;
}

TEST(IpcClientProcess, OtherUidIsRefusedWhenNotAllowed) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch to uid 65534";
  TestServer srv([](clients::IpcConfig& c) { c.allowed_uids = {1000}; });
  EXPECT_EQ(run_as_nobody(srv, 1), "connect=2 hello=2 deregister=-1 list=0");  // 2 = RDMAD_ERR_PERMISSION
  EXPECT_EQ(srv.metric("rdmad_client_requests_total", {{"op", "unknown"}, {"result", "permission"}}), 2.0);
}

TEST(IpcClientProcess, AllowedOtherUidCannotUseAnotherConnectionsHandle) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch to uid 65534";
  TestServer srv([](clients::IpcConfig& c) { c.allowed_gids = {65534}; });
  rdmad_client* owner = nullptr;
  ASSERT_EQ(rdmad_connect(srv.path().c_str(), &owner), RDMAD_OK);
  rdmad_host_buffer buf;
  ASSERT_EQ(rdmad_alloc_host(4096, &buf), RDMAD_OK);
  rdmad_mr* mr = nullptr;
  ASSERT_EQ(rdmad_register_host(owner, buf.fd, 0, 4096, RDMAD_ACCESS_LOCAL_WRITE, 0, &mr), RDMAD_OK);
  EXPECT_EQ(run_as_nobody(srv, rdmad_mr_handle(mr)), "connect=0 hello=0 deregister=2 list=0");
  EXPECT_EQ(srv.handle_count(), 1u);  // the owner's registration survived
  EXPECT_EQ(rdmad_deregister(owner, mr), RDMAD_OK);
  rdmad_disconnect(owner);
  rdmad_free_host(&buf);
}

}  // namespace
}  // namespace rdmad::test
