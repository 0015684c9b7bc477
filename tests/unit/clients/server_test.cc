// librdmad against the server on a real socket: operations, caching, concurrency, restart.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "raw_client.h"
#include "rdmad/rdmad.h"
#include "rdmad/rdmad.hpp"
#include "server_fixture.h"

extern char** environ;

namespace rdmad::test {
namespace {

constexpr uint32_t kRw = RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ;

rdmad_client* connect_or_die(const std::string& path) {
  rdmad_client* c = nullptr;
  EXPECT_EQ(rdmad_connect(path.c_str(), &c), RDMAD_OK) << rdmad_last_error(nullptr);
  return c;
}

TEST(IpcServer, QueryRegisterListDeregisterByteExact) {
  TestServer srv;
  ASSERT_TRUE(srv.started()) << srv.start_error();
  rdmad_client* c = connect_or_die(srv.path());
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(rdmad_protocol_version(c), proto::kVersionMax);

  rdmad_nic_info nics[4];
  size_t n = 0;
  ASSERT_EQ(rdmad_query_nics(c, nics, 4, &n), RDMAD_OK);
  ASSERT_EQ(n, 2u);
  EXPECT_STREQ(nics[1].name, "soft1");
  EXPECT_STREQ(nics[1].backend, "soft");
  EXPECT_EQ(nics[1].numa_node, 1);
  EXPECT_EQ(nics[1].link_state, RDMAD_LINK_UP);
  rdmad_location host{RDMAD_MEM_HOST, 1, {}};
  ASSERT_EQ(rdmad_nearest_nics(c, &host, nics, 4, &n), RDMAD_OK);
  ASSERT_EQ(n, 1u);
  EXPECT_STREQ(nics[0].name, "soft1");

  rdmad_host_buffer buf;
  ASSERT_EQ(rdmad_alloc_host(65536, &buf), RDMAD_OK);
  auto* bytes = static_cast<unsigned char*>(buf.addr);
  for (size_t i = 0; i < buf.length; ++i) bytes[i] = static_cast<unsigned char>(i * 13 + 1);
  rdmad_mr* mr = nullptr;
  ASSERT_EQ(rdmad_register_host(c, buf.fd, 4096 + 100, 5000, kRw, 0x2, &mr), RDMAD_OK) << rdmad_last_error(c);
  ASSERT_EQ(rdmad_mr_nic_count(mr), 1u);
  rdmad_nic_key key;
  ASSERT_EQ(rdmad_mr_key(mr, 0, &key), RDMAD_OK);
  EXPECT_EQ(key.nic_index, 1u);
  EXPECT_EQ(rdmad_mr_length(mr), 5000u);

  uint64_t handle = rdmad_mr_handle(mr);
  auto region = srv.on_server(
      [&] { return srv.registrar().region_for_test(srv.server().service().mr_id_for_test(handle)); });
  ASSERT_EQ(region.size(), 5000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(region.data()), rdmad_mr_iova(mr));
  bytes[4096 + 100] = 0xEE;  // the daemon's mapping shares the pages
  EXPECT_EQ(std::memcmp(region.data(), bytes + 4096 + 100, 5000), 0);

  rdmad_registration_info list[4];
  ASSERT_EQ(rdmad_list_registrations(c, list, 4, &n), RDMAD_OK);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(list[0].handle, handle);
  EXPECT_EQ(list[0].offset, 4196u);
  EXPECT_EQ(list[0].kind, RDMAD_MEM_HOST);
  EXPECT_EQ(srv.metric("rdmad_registered_bytes", {{"kind", "host"}}), 8192.0);
  EXPECT_EQ(srv.metric("rdmad_registrations", {{"kind", "host"}}), 1.0);

  ASSERT_EQ(rdmad_deregister(c, mr), RDMAD_OK);
  ASSERT_EQ(rdmad_list_registrations(c, list, 4, &n), RDMAD_OK);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(srv.region_count(), 0u);
  EXPECT_EQ(srv.metric("rdmad_registered_bytes", {{"kind", "host"}}), 0.0);
  EXPECT_EQ(srv.metric("rdmad_client_requests_total", {{"op", "register_host"}, {"result", "ok"}}), 1.0);
  EXPECT_EQ(srv.metric("rdmad_registration_duration_seconds"), 1.0);
  rdmad_free_host(&buf);
  rdmad_disconnect(c);
}

TEST(IpcServer, ClientCachesRepeatsAndDaemonDedupsAcrossConnections) {
  TestServer srv;
  rdmad_client* a = connect_or_die(srv.path());
  rdmad_client* b = connect_or_die(srv.path());
  rdmad_host_buffer buf;
  ASSERT_EQ(rdmad_alloc_host(1 << 20, &buf), RDMAD_OK);
  rdmad_mr *m1 = nullptr, *m2 = nullptr, *m3 = nullptr;
  ASSERT_EQ(rdmad_register_host(a, buf.fd, 0, buf.length, kRw, 0, &m1), RDMAD_OK);
  ASSERT_EQ(rdmad_register_host(a, buf.fd, 0, buf.length, kRw, 0, &m2), RDMAD_OK);
  EXPECT_EQ(m1, m2);  // cached in the library: no second handle
  EXPECT_EQ(srv.handle_count(), 1u);
  ASSERT_EQ(rdmad_register_host(b, buf.fd, 0, buf.length, kRw, 0, &m3), RDMAD_OK);
  EXPECT_EQ(srv.handle_count(), 2u);
  EXPECT_EQ(srv.region_count(), 1u);  // deduplicated in the daemon
  rdmad_nic_key k1, k3;
  rdmad_mr_key(m1, 0, &k1);
  rdmad_mr_key(m3, 0, &k3);
  EXPECT_EQ(k1.rkey, k3.rkey);
  EXPECT_EQ(srv.metric("rdmad_registered_bytes", {{"kind", "host"}}), double(1 << 20));
  ASSERT_EQ(rdmad_deregister(a, m1), RDMAD_OK);
  EXPECT_EQ(srv.handle_count(), 2u);  // a's second reference keeps its daemon handle
  ASSERT_EQ(rdmad_deregister(a, m2), RDMAD_OK);
  EXPECT_EQ(srv.handle_count(), 1u);
  EXPECT_EQ(srv.region_count(), 1u);  // b still holds it
  rdmad_disconnect(b);
  EXPECT_TRUE(eventually([&] { return srv.region_count() == 0; }));
  rdmad_disconnect(a);
  rdmad_free_host(&buf);
}

TEST(IpcServer, AnotherConnectionsHandleIsAPermissionError) {
  TestServer srv;
  rdmad_client* owner = connect_or_die(srv.path());
  rdmad_host_buffer buf;
  ASSERT_EQ(rdmad_alloc_host(4096, &buf), RDMAD_OK);
  rdmad_mr* mr = nullptr;
  ASSERT_EQ(rdmad_register_host(owner, buf.fd, 0, 4096, kRw, 0, &mr), RDMAD_OK);
  RawClient thief(srv.path());
  ASSERT_TRUE(thief.hello());
  thief.send(proto::MsgType::kDeregister, proto::DeregisterRequest{rdmad_mr_handle(mr)}, 2);
  RawReply r = thief.receive();
  EXPECT_EQ(r.status(), RDMAD_ERR_PERMISSION) << r.message();
  EXPECT_EQ(r.header.request_id, 2u);
  EXPECT_EQ(srv.handle_count(), 1u);
  EXPECT_EQ(rdmad_deregister(owner, mr), RDMAD_OK);
  rdmad_disconnect(owner);
  rdmad_free_host(&buf);
}

TEST(IpcServer, QuotaExceededIsClearAndLeavesNothing) {
  TestServer srv([](clients::IpcConfig& c) { c.default_quota = clients::Quota{1 << 20, 4}; });
  rdmad_client* c = connect_or_die(srv.path());
  rdmad_host_buffer buf;
  ASSERT_EQ(rdmad_alloc_host(4 << 20, &buf), RDMAD_OK);
  size_t fds_before = open_fd_count();
  rdmad_mr* mr = nullptr;
  ASSERT_EQ(rdmad_register_host(c, buf.fd, 0, 2 << 20, kRw, 0, &mr), RDMAD_ERR_QUOTA);
  EXPECT_NE(std::strstr(rdmad_last_error(c), "pinned-bytes quota"), nullptr) << rdmad_last_error(c);
  EXPECT_EQ(mr, nullptr);
  EXPECT_EQ(srv.region_count(), 0u);
  EXPECT_EQ(open_fd_count(), fds_before);
  EXPECT_EQ(srv.metric("rdmad_registered_bytes", {{"kind", "host"}}), 0.0);
  EXPECT_EQ(srv.metric("rdmad_client_requests_total", {{"op", "register_host"}, {"result", "quota"}}), 1.0);
  rdmad_disconnect(c);
  rdmad_free_host(&buf);
}

TEST(IpcServer, ManyConcurrentClients) {
  TestServer srv;
  constexpr int kClients = 16, kPairs = 200;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      rdmad_client* c = nullptr;
      if (rdmad_connect(srv.path().c_str(), &c) != RDMAD_OK) {
        ++failures;
        return;
      }
      rdmad_host_buffer buf;
      rdmad_alloc_host(16 * 4096, &buf);
      for (int i = 0; i < kPairs; ++i) {
        rdmad_mr* mr = nullptr;
        uint64_t off = static_cast<uint64_t>((i + t) % 16) * 4096;
        if (rdmad_register_host(c, buf.fd, off, 4096, kRw, 0, &mr) != RDMAD_OK ||
            rdmad_mr_nic_count(mr) != 2 || rdmad_mr_length(mr) != 4096 || rdmad_deregister(c, mr) != RDMAD_OK)
          ++failures;
      }
      rdmad_free_host(&buf);
      rdmad_disconnect(c);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(eventually([&] { return srv.metric("rdmad_clients_connected") == 0; }));
  EXPECT_EQ(srv.region_count(), 0u);
  EXPECT_EQ(srv.metric("rdmad_client_requests_total", {{"op", "register_host"}, {"result", "ok"}}),
            double(kClients * kPairs));
}

TEST(IpcServer, ThousandsOfIdleConnectionsOnOneThread) {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  constexpr size_t kConnections = 2000;
  if (lim.rlim_max < 2 * kConnections + 100)
    GTEST_SKIP() << "RLIMIT_NOFILE hard limit " << lim.rlim_max << " too low";
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
  // One uid's connections: within its quota here (the default, 1024, would refuse the rest).
  TestServer srv([](clients::IpcConfig& c) { c.default_quota.max_connections = kConnections; });
  std::vector<std::unique_ptr<RawClient>> clients;
  for (size_t i = 0; i < kConnections; ++i) {
    clients.push_back(std::make_unique<RawClient>(srv.path()));
    ASSERT_TRUE(clients.back()->hello()) << "client " << i;
  }
  EXPECT_EQ(srv.metric("rdmad_clients_connected"), double(kConnections));
  // The last one is still served promptly.
  clients.back()->send_empty(proto::MsgType::kQueryNics, 7);
  EXPECT_EQ(clients.back()->receive().header.type, proto::reply_type(proto::MsgType::kQueryNics));
  clients.clear();
  EXPECT_TRUE(eventually([&] { return srv.metric("rdmad_clients_connected") == 0; }));
}

TEST(IpcServer, DisconnectReleasesEverythingWithinASecond) {
  TestServer srv;
  size_t fds_before = open_fd_count();
  rdmad_client* c = connect_or_die(srv.path());
  rdmad_host_buffer buf;
  ASSERT_EQ(rdmad_alloc_host(64 * 4096, &buf), RDMAD_OK);
  for (uint64_t i = 0; i < 64; ++i) {
    rdmad_mr* mr = nullptr;
    ASSERT_EQ(rdmad_register_host(c, buf.fd, i * 4096, 4096, kRw, 0, &mr), RDMAD_OK);
  }
  EXPECT_EQ(srv.region_count(), 64u);
  rdmad_free_host(&buf);
  rdmad_disconnect(c);
  EXPECT_TRUE(eventually([&] { return srv.region_count() == 0 && open_fd_count() == fds_before; }));
  EXPECT_EQ(srv.metric("rdmad_registered_bytes", {{"kind", "host"}}), 0.0);
  EXPECT_EQ(srv.registrar().live_regions(), 0u);
}

struct LostLog {
  std::vector<uint64_t> handles;
};

TEST(IpcServer, ReconnectsAfterRestartAndReportsLostRegistrations) {
  TestServer srv;
  rdmad_client* c = connect_or_die(srv.path());
  LostLog log;
  rdmad_set_lost_callback(
      c,
      [](void* user, rdmad_mr*, uint64_t handle) { static_cast<LostLog*>(user)->handles.push_back(handle); },
      &log);
  rdmad_host_buffer buf;
  ASSERT_EQ(rdmad_alloc_host(2 * 4096, &buf), RDMAD_OK);
  rdmad_mr *m1 = nullptr, *m2 = nullptr;
  ASSERT_EQ(rdmad_register_host(c, buf.fd, 0, 4096, kRw, 0, &m1), RDMAD_OK);
  ASSERT_EQ(rdmad_register_host(c, buf.fd, 4096, 4096, kRw, 0, &m2), RDMAD_OK);
  std::vector<uint64_t> expected = {rdmad_mr_handle(m1), rdmad_mr_handle(m2)};
  srv.restart();
  size_t n = 0;
  rdmad_nic_info nics[4];
  ASSERT_EQ(rdmad_query_nics(c, nics, 4, &n), RDMAD_OK) << rdmad_last_error(c);
  std::sort(log.handles.begin(), log.handles.end());
  EXPECT_EQ(log.handles, expected);
  EXPECT_EQ(rdmad_mr_is_lost(m1), 1);
  // The same range registers again on the new daemon (not served from the stale cache).
  rdmad_mr* again = nullptr;
  ASSERT_EQ(rdmad_register_host(c, buf.fd, 0, 4096, kRw, 0, &again), RDMAD_OK);
  EXPECT_NE(again, m1);
  EXPECT_EQ(srv.handle_count(), 1u);
  EXPECT_EQ(rdmad_deregister(c, m1), RDMAD_OK);
  EXPECT_EQ(rdmad_deregister(c, m2), RDMAD_OK);
  EXPECT_EQ(rdmad_deregister(c, again), RDMAD_OK);
  rdmad_disconnect(c);
  rdmad_free_host(&buf);
}

TEST(IpcServer, SocketModeGroupAndLiveSocketProtection) {
  TestServer srv([](clients::IpcConfig& c) {
    c.socket_mode = 0660;
    c.socket_group = "nogroup";
  });
  ASSERT_TRUE(srv.started()) << srv.start_error();
  struct stat st {};
  ASSERT_EQ(stat(srv.path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(st.st_gid, 65534u);
  // A second daemon on the same path must not steal a live socket.
  boost::asio::io_context io;
  prometheus::Registry registry;
  clients::SoftRegistrar reg(1);
  clients::StaticNicDirectory inv(soft_nics());
  clients::UnixServer second(io, srv.server().config(), reg, inv, registry);
  auto r = second.start();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("another daemon"), std::string::npos) << r.error().message;
  rdmad_client* c = connect_or_die(srv.path());  // still the first one's
  rdmad_disconnect(c);
}

namespace {

// A Unix socket of `type` bound at `path`, listening when `listening`; -1 on failure.
int bound_unix_socket(const std::string& path, int type, bool listening) {
  int s = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || (listening && listen(s, 16) != 0)) {
    ::close(s);
    return -1;
  }
  return s;
}

clients::Result<clients::Ok> start_server_at(const std::string& dir, const std::string& path) {
  boost::asio::io_context io;
  prometheus::Registry registry;
  clients::SoftRegistrar reg(1);
  clients::StaticNicDirectory inv(soft_nics());
  clients::IpcConfig config = test_config(dir);
  config.socket_path = path;
  clients::UnixServer server(io, config, reg, inv, registry);
  return server.start();
}

}  // namespace

// A live socket of another type at socket_path (what systemd makes from ListenStream=) is somebody
// else's: start fails naming the cause, and the socket stays where it is, still accepting.
TEST(IpcServer, LiveStreamSocketAtThePathIsLeftInPlace) {
  TempDir dir;
  const std::string path = dir.path() + "/stream.sock";
  int listener = bound_unix_socket(path, SOCK_STREAM, true);
  ASSERT_GE(listener, 0) << std::strerror(errno);
  auto r = start_server_at(dir.path(), path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("another type"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("ListenSequentialPacket="), std::string::npos) << r.error().message;
  struct stat st {};
  ASSERT_EQ(lstat(path.c_str(), &st), 0) << "the live stream socket was deleted";
  int client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  ::close(client);
  ::close(listener);
}

// A socket nobody listens on (left by a crash) is removed and the path served again.
TEST(IpcServer, StaleSocketAtThePathIsReplaced) {
  TempDir dir;
  const std::string path = dir.path() + "/stale.sock";
  int dead = bound_unix_socket(path, SOCK_SEQPACKET, false);
  ASSERT_GE(dead, 0) << std::strerror(errno);
  ::close(dead);
  auto r = start_server_at(dir.path(), path);
  EXPECT_TRUE(r.ok()) << r.error().message;
}

TEST(IpcServer, AdoptsASystemdSocket) {
  // sd_listen_fds() wants the socket at fd 3 and LISTEN_PID = our pid: do it in a child process.
  TempDir dir;
  std::string path = dir.path() + "/activated.sock";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    if (bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(s, 16) != 0) _exit(10);
    if (dup2(s, 3) != 3) _exit(11);
    setenv("LISTEN_FDS", "1", 1);
    setenv("LISTEN_PID", std::to_string(getpid()).c_str(), 1);
    boost::asio::io_context io;
    prometheus::Registry registry;
    clients::SoftRegistrar reg(1);
    clients::StaticNicDirectory inv(soft_nics());
    clients::IpcConfig config = test_config(dir.path());
    config.socket_path = path;
    config.systemd_activation = true;
    clients::UnixServer server(io, config, reg, inv, registry);
    if (!server.start().ok() || !server.socket_activated()) _exit(12);
    std::thread loop([&] { io.run_for(std::chrono::seconds(5)); });
    RawClient client(path);
    bool ok = client.connected() && client.hello();
    io.stop();
    loop.join();
    _exit(ok ? 0 : 13);  // no destructors: this is a forked copy of the test process
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(IpcServer, DiagnoseAndGpuRegistrationNameTheReason) {
  TestServer srv;
  rdmad::Client c(srv.path().c_str());
  std::string text = c.diagnose();
  EXPECT_NE(text.find("fail dmabuf soft0: not supported by backend soft"), std::string::npos) << text;
  EXPECT_NE(text.find("gpudirect: "), std::string::npos) << text;
  try {
    c.register_gpu(0x7f0000000000, 4096, kRw);
    ADD_FAILURE() << "registering a non-device pointer succeeded";
  } catch (const rdmad::Error& e) {
    // Without CUDA: the driver is missing; with CUDA: the pointer is not device memory.
    EXPECT_TRUE(e.status() == RDMAD_ERR_CUDA || e.status() == RDMAD_ERR_INVALID_ARGUMENT) << e.what();
    EXPECT_TRUE(std::strstr(e.what(), "CUDA") != nullptr ||
                std::strstr(e.what(), "device pointer") != nullptr)
        << e.what();
  }
}

TEST(IpcServer, CxxWrapperDeregistersOnScopeExit) {
  TestServer srv;
  rdmad::Client c(srv.path().c_str());
  EXPECT_EQ(c.nics().size(), 2u);
  rdmad::HostBuffer buf(8192);
  {
    auto reg = c.register_host(buf, kRw);
    EXPECT_EQ(reg.keys().size(), 2u);
    EXPECT_EQ(srv.handle_count(), 1u);
    auto moved = std::move(reg);
    EXPECT_EQ(srv.handle_count(), 1u);
  }
  EXPECT_EQ(srv.handle_count(), 0u);
}

TEST(IpcServer, RegisterHostExampleRuns) {
  TestServer srv;
  std::string exe = std::string(RDMAD_BINARY_DIR) + "/client/rdmad_example_register_host";
  std::string arg = srv.path();
  char* argv[] = {exe.data(), arg.data(), nullptr};
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, environ), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace rdmad::test

namespace rdmad::test {
namespace {

// Pipelined requests from a client that does not read: the server's replies back up, it stops
// reading until they drain, and every reply still arrives once, in order.
TEST(IpcServer, PipelinedRequestsWithASlowReaderAllAnsweredInOrder) {
  TestServer srv;
  RawClient raw(srv.path());
  ASSERT_TRUE(raw.hello());
  // Room for more requests than the server may queue towards us (net.unix.max_dgram_qlen, its
  // send buffer), so its sends hit EAGAIN. SO_SNDBUFFORCE needs root; without it fewer fit.
  int big = 16 << 20;
  setsockopt(raw.fd(), SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big));
  uint64_t sent = 0;
  for (uint64_t id = 100; id < 100 + 2000; ++id) {
    auto h = proto::make_header(1, static_cast<uint16_t>(proto::MsgType::kDiagnose), 0, id);
    if (::send(raw.fd(), &h, sizeof(h), MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof(h))
      break;  // our buffer is full
    ++sent;
  }
  ASSERT_GT(sent, 100u);
  for (uint64_t i = 0; i < sent; ++i) {
    RawReply r = raw.receive();
    ASSERT_FALSE(r.closed) << "reply " << i;
    EXPECT_EQ(r.header.request_id, 100 + i);
    EXPECT_EQ(r.header.type, proto::reply_type(proto::MsgType::kDiagnose));
  }
  EXPECT_EQ(srv.metric("rdmad_client_requests_total", {{"op", "diagnose"}, {"result", "ok"}}), double(sent));
}

}  // namespace
}  // namespace rdmad::test

namespace rdmad::test {
namespace {

TEST(IpcServer, ClientsBeyondMaxClientsAreRefusedWithAReason) {
  TestServer srv([](clients::IpcConfig& c) { c.max_clients = 2; });
  RawClient a(srv.path()), b(srv.path());
  ASSERT_TRUE(a.hello() && b.hello());
  rdmad_client* third = nullptr;
  EXPECT_EQ(rdmad_connect(srv.path().c_str(), &third), RDMAD_ERR_NO_RESOURCE);
  EXPECT_NE(std::strstr(rdmad_last_error(nullptr), "too many clients"), nullptr) << rdmad_last_error(nullptr);
  EXPECT_EQ(srv.client_count(), 2u);
}

}  // namespace
}  // namespace rdmad::test
