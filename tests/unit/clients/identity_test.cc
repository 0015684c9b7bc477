// Who may do what on which socket: admin requests only on the admin socket (root and the daemon's
// uid), and per-tenant (pod, else uid) quotas and listings on the client socket, with the tenants'
// cgroups from a fixture /proc (tests/data/cgroup).
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "rdmad/admin.h"
#include "rdmad/rdmad.h"
#include "server_fixture.h"

namespace rdmad::test {
namespace {

namespace fs = std::filesystem;
using proto::MsgType;

constexpr const char* kPodA = "6f1e5b8a-3c2d-4e9f-8a7b-1c2d3e4f5a6b";  // systemd_v2_burstable
constexpr const char* kPodB = "0c3f2b1a-9e8d-4c7b-a6f5-e4d3c2b1a098";  // cgroupfs_v1_besteffort
constexpr uid_t kNobody = 65534;
const fs::path kFixtures = fs::path(RDMAD_SOURCE_DIR) / "tests/data/cgroup";

std::string admin_path(const TestServer& srv) { return srv.dir() + "/admin/admin.sock"; }

void with_admin_socket(clients::IpcConfig& c) {
  c.admin_socket_path = fs::path(c.socket_path).parent_path().string() + "/admin/admin.sock";
}

rdmad_status list_all(rdmad_client* c, std::vector<proto::RegistrationEntry>* out) {
  proto::ListRequest req{0, proto::kMaxRegistrationListEntries, 0};
  std::vector<std::byte> reply;
  const auto st = admin::call(c, MsgType::kListAllRegistrations,
                              {reinterpret_cast<const std::byte*>(&req), sizeof req}, &reply);
  if (st != RDMAD_OK || out == nullptr) return st;
  proto::ListReply head{};
  if (reply.size() < sizeof head) return RDMAD_ERR_PROTOCOL;
  std::memcpy(&head, reply.data(), sizeof head);
  if (reply.size() < sizeof head + head.count * sizeof(proto::RegistrationEntry)) return RDMAD_ERR_PROTOCOL;
  out->resize(head.count);
  if (head.count > 0)  // an empty vector's data() may be null
    std::memcpy(out->data(), reply.data() + sizeof head, head.count * sizeof(proto::RegistrationEntry));
  return st;
}

// Exit status of f() run as uid/gid `uid` in a child.
int as_uid(uid_t uid, const std::function<int()>& f) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0)
      ::_exit(100);
    ::_exit(f());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200;
}

TEST(AdminSocket, AdminRequestOnTheClientSocketIsRefusedEvenToRoot) {
  ASSERT_EQ(::geteuid(), 0u) << "the test runs as root";
  TestServer srv(with_admin_socket);
  ASSERT_TRUE(srv.started()) << srv.start_error();
  rdmad_client* c = nullptr;
  ASSERT_EQ(rdmad_connect(srv.path().c_str(), &c), RDMAD_OK) << rdmad_last_error(nullptr);
  EXPECT_EQ(list_all(c, nullptr), RDMAD_ERR_ADMIN_SOCKET);
  const std::string why = rdmad_last_error(c);
  EXPECT_NE(why.find("admin requests go to the admin socket " + admin_path(srv)), std::string::npos) << why;
  // Every admin request type, not only the listing.
  std::vector<std::byte> reply;
  EXPECT_EQ(admin::call(c, MsgType::kReload, {}, &reply), RDMAD_ERR_ADMIN_SOCKET);
  EXPECT_EQ(admin::call(c, MsgType::kStatus, {}, &reply), RDMAD_ERR_ADMIN_SOCKET);
  // The connection goes on serving the client's own requests.
  size_t n = 0;
  EXPECT_EQ(rdmad_query_nics(c, nullptr, 0, &n), RDMAD_OK);
  rdmad_disconnect(c);
}

TEST(AdminSocket, ServesRootFromItsOwnDirectoryWithMode0600) {
  TestServer srv(with_admin_socket);
  ASSERT_TRUE(srv.started()) << srv.start_error();
  struct stat st {};
  ASSERT_EQ(::stat(admin_path(srv).c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, ::geteuid());
  ASSERT_EQ(::stat((srv.dir() + "/admin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);  // made by the server: the daemon's own directory
  rdmad_client* a = nullptr;
  ASSERT_EQ(rdmad_connect(admin_path(srv).c_str(), &a), RDMAD_OK) << rdmad_last_error(nullptr);
  std::vector<proto::RegistrationEntry> entries;
  EXPECT_EQ(list_all(a, &entries), RDMAD_OK) << rdmad_last_error(a);
  EXPECT_TRUE(entries.empty());
  rdmad_disconnect(a);
}

TEST(AdminSocket, RefusesOtherUidsByModeAndByCredentials) {
  TestServer srv(with_admin_socket);
  ASSERT_TRUE(srv.started()) << srv.start_error();
  ASSERT_EQ(::chmod((srv.dir() + "/admin").c_str(), 0755), 0);
  const std::string path = admin_path(srv);
  auto try_connect = [&] {
    rdmad_client* c = nullptr;
    const auto st = rdmad_connect(path.c_str(), &c);
    if (c != nullptr) rdmad_disconnect(c);
    return st == RDMAD_ERR_PERMISSION ? 0 : 10 + static_cast<int>(st);
  };
  // The socket's mode (0600, the daemon's uid) stops it at connect().
  EXPECT_EQ(as_uid(kNobody, try_connect), 0);
  // A socket whose mode someone widened: SO_PEERCRED still stops it, with the reason.
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  EXPECT_EQ(as_uid(kNobody, [&] {
              rdmad_client* c = nullptr;
              if (rdmad_connect(path.c_str(), &c) != RDMAD_ERR_PERMISSION) return 1;
              return std::string(rdmad_last_error(nullptr)).find("uid 65534 is not allowed") != std::string::npos ? 0
                                                                                                                  : 2;
            }),
            0);
  // The client socket (0666 here) still serves that uid.
  EXPECT_EQ(as_uid(kNobody, [&] {
              rdmad_client* c = nullptr;
              if (rdmad_connect(srv.path().c_str(), &c) != RDMAD_OK) return 1;
              rdmad_disconnect(c);
              return 0;
            }),
            0);
}

// A /proc of our own: this process's cgroup file says which pod (or none) the next connection is in.
class FakeProc {
 public:
  FakeProc() { fs::create_directories(fs::path(dir_.path()) / std::to_string(::getpid())); }
  void be(const std::string& fixture) {
    const fs::path file = fs::path(dir_.path()) / std::to_string(::getpid()) / "cgroup";
    fs::copy_file(kFixtures / fixture, file, fs::copy_options::overwrite_existing);
  }
  void vanish() { fs::remove(fs::path(dir_.path()) / std::to_string(::getpid()) / "cgroup"); }
  const std::string& root() const { return dir_.path(); }

 private:
  TempDir dir_;
};

rdmad_client* connect_as(FakeProc& proc, const std::string& fixture, const std::string& path) {
  proc.be(fixture);
  rdmad_client* c = nullptr;
  // The tenant is read at accept, which hello waits for: the file may change after this returns.
  EXPECT_EQ(rdmad_connect(path.c_str(), &c), RDMAD_OK) << rdmad_last_error(nullptr);
  return c;
}

// Registers `n` distinct 4 KiB ranges of buf; returns the status of the first that fails (or OK).
rdmad_status register_n(rdmad_client* c, const rdmad_host_buffer& buf, int n, std::vector<rdmad_mr*>* mrs) {
  for (int i = 0; i < n; ++i) {
    rdmad_mr* mr = nullptr;
    const auto st = rdmad_register_host(c, buf.fd, static_cast<uint64_t>(mrs->size()) * 4096, 4096,
                                        RDMAD_ACCESS_LOCAL_WRITE, 0, &mr);
    if (st != RDMAD_OK) return st;
    mrs->push_back(mr);
  }
  return RDMAD_OK;
}

TEST(Tenants, QuotasCountPodsNotUidsAndListingsNameThem) {
  FakeProc proc;
  TestServer srv([&](clients::IpcConfig& c) {
    with_admin_socket(c);
    c.proc_root = proc.root();
    c.quotas[0].max_registrations = 1;  // root outside any pod
    c.pod_quotas[kPodA].max_registrations = 2;
  });
  ASSERT_TRUE(srv.started()) << srv.start_error();
  rdmad_host_buffer buf;
  ASSERT_EQ(rdmad_alloc_host(64 * 4096, &buf), RDMAD_OK);
  rdmad_client* a = connect_as(proc, "systemd_v2_burstable", srv.path());
  rdmad_client* b = connect_as(proc, "cgroupfs_v1_besteffort", srv.path());
  rdmad_client* host = connect_as(proc, "host_session", srv.path());
  ASSERT_TRUE(a && b && host);
  std::vector<rdmad_mr*> ma, mb, mh;
  // All three are uid 0; each is held to its own tenant's quota.
  EXPECT_EQ(register_n(a, buf, 2, &ma), RDMAD_OK) << rdmad_last_error(a);
  EXPECT_EQ(register_n(a, buf, 1, &ma), RDMAD_ERR_QUOTA);
  EXPECT_NE(std::string(rdmad_last_error(a)).find(std::string("pod ") + kPodA), std::string::npos)
      << rdmad_last_error(a);
  EXPECT_EQ(register_n(b, buf, 3, &mb), RDMAD_OK) << rdmad_last_error(b);  // the default quota
  EXPECT_EQ(register_n(host, buf, 1, &mh), RDMAD_OK) << rdmad_last_error(host);
  EXPECT_EQ(register_n(host, buf, 1, &mh), RDMAD_ERR_QUOTA);
  EXPECT_NE(std::string(rdmad_last_error(host)).find("uid 0"), std::string::npos) << rdmad_last_error(host);

  // The operator sees every tenant's registrations, each with its pod.
  rdmad_client* admin = nullptr;
  ASSERT_EQ(rdmad_connect(admin_path(srv).c_str(), &admin), RDMAD_OK) << rdmad_last_error(nullptr);
  std::vector<proto::RegistrationEntry> entries;
  ASSERT_EQ(list_all(admin, &entries), RDMAD_OK) << rdmad_last_error(admin);
  std::map<std::string, int> by_pod;
  for (const auto& e : entries) ++by_pod[e.owner_pod];
  EXPECT_EQ(by_pod, (std::map<std::string, int>{{"", 1}, {kPodA, 2}, {kPodB, 3}}));

  // Released on disconnect, per tenant: pod A's quota is free again, the others' holdings stay.
  rdmad_disconnect(a);
  EXPECT_TRUE(eventually([&] {
    return srv.on_server([&] { return srv.server().service().usage(clients::Tenant::of_pod(kPodA)).registrations; }) == 0;
  }));
  EXPECT_EQ(srv.on_server([&] { return srv.server().service().usage(clients::Tenant::of_pod(kPodB)).registrations; }),
            3u);
  EXPECT_EQ(srv.on_server([&] { return srv.server().service().usage(clients::Tenant::of_uid(0)).registrations; }), 1u);
  rdmad_client* a2 = connect_as(proc, "systemd_v2_burstable", srv.path());
  std::vector<rdmad_mr*> ma2;
  EXPECT_EQ(register_n(a2, buf, 2, &ma2), RDMAD_OK) << rdmad_last_error(a2);
  for (auto* c : {a2, b, host, admin}) rdmad_disconnect(c);
  rdmad_free_host(&buf);
}

TEST(Tenants, AClientWhoseCgroupCannotBeReadIsRefused) {
  FakeProc proc;
  TestServer srv([&](clients::IpcConfig& c) { c.proc_root = proc.root(); });
  ASSERT_TRUE(srv.started()) << srv.start_error();
  proc.vanish();
  rdmad_client* c = nullptr;
  EXPECT_EQ(rdmad_connect(srv.path().c_str(), &c), RDMAD_ERR_PERMISSION);
  EXPECT_NE(std::string(rdmad_last_error(nullptr)).find("cannot tell the tenant of pid"), std::string::npos)
      << rdmad_last_error(nullptr);
  // The server goes on serving the others.
  proc.be("host_session");
  ASSERT_EQ(rdmad_connect(srv.path().c_str(), &c), RDMAD_OK) << rdmad_last_error(nullptr);
  rdmad_disconnect(c);
}

}  // namespace
}  // namespace rdmad::test
