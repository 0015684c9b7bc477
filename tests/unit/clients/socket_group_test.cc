// [ipc] socket_group without CAP_CHOWN: the server runs in a child that has dropped the capability
// (bounding set, permitted, effective), as the hardened unit's rdmad does. A uid in the group
// connects and registers through the socket; a uid outside it cannot connect.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <filesystem>

#include "rdmad/rdmad.h"
#include "server_fixture.h"

namespace rdmad::test {
namespace {

namespace fs = std::filesystem;
constexpr uid_t kMember = 4242, kOutsider = 4243;

gid_t users_gid() {
  group* g = getgrnam("users");  // in every Debian base system (gid 100)
  return g != nullptr ? g->gr_gid : static_cast<gid_t>(-1);
}

bool drop_chown() {
  if (prctl(PR_CAPBSET_DROP, CAP_CHOWN, 0, 0, 0) != 0) return false;
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2]{};
  if (syscall(SYS_capget, &h, d) != 0) return false;
  for (auto* set : {&d[0].effective, &d[0].permitted, &d[0].inheritable}) *set &= ~(1u << CAP_CHOWN);
  return syscall(SYS_capset, &h, d) == 0;
}

// As rdmad.service's SystemCallFilter=~@privileged (SystemCallErrorNumber=EPERM): every chown
// call fails with EPERM, even one that would change nothing.
bool filter_chown() {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_chown, 4, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fchown, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_lchown, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fchownat, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof code / sizeof code[0]), code};
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

// A TestServer in a child without CAP_CHOWN (and, with `no_chown_calls`, with chown filtered as
// under the unit); `error()` is its start error ("" when it serves).
class ServerWithoutChown {
 public:
  ServerWithoutChown(const std::string& socket_dir, const std::string& group, bool join_group,
                     bool no_chown_calls = false) {
    int ready[2], stop[2];
    EXPECT_EQ(::pipe(ready), 0);
    EXPECT_EQ(::pipe(stop), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      ::close(stop[1]);
      std::string result;
      const gid_t gid = users_gid();
      if (join_group && ::setgroups(1, &gid) != 0) result = "setgroups failed";
      if (result.empty() && !drop_chown()) result = "cannot drop CAP_CHOWN";
      // The capability is really gone: root may not give a file of its own to a group it is not in.
      if (result.empty() && !join_group) {
        const std::string probe = fs::path(socket_dir).parent_path().string() + "/probe";
        ::close(::open(probe.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
        if (::chown(probe.c_str(), static_cast<uid_t>(-1), gid) == 0) result = "chown worked without CAP_CHOWN";
        ::unlink(probe.c_str());
      }
      if (result.empty() && no_chown_calls && !filter_chown()) result = "cannot install the seccomp filter";
      std::optional<TestServer> srv;
      if (result.empty()) {
        srv.emplace([&](clients::IpcConfig& c) {
          c.socket_path = socket_dir + "/rdmad.sock";
          c.socket_mode = 0660;
          c.socket_group = group;
        });
        if (!srv->started()) result = "start: " + srv->start_error();
      }
      result = result.empty() ? "ok" : result;
      (void)!::write(ready[1], result.data(), result.size());
      ::close(ready[1]);
      char c;
      while (::read(stop[0], &c, 1) > 0) {
      }
      srv.reset();
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(stop[0]);
    stop_ = stop[1];
    char buf[1024];
    ssize_t n = 0, got;
    while ((got = ::read(ready[0], buf + n, sizeof buf - static_cast<size_t>(n))) > 0) n += got;
    ::close(ready[0]);
    result_.assign(buf, static_cast<size_t>(std::max<ssize_t>(n, 0)));
  }
  ~ServerWithoutChown() {
    ::close(stop_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  std::string error() const { return result_ == "ok" ? "" : result_; }

 private:
  pid_t pid_ = -1;
  int stop_ = -1;
  std::string result_;
};

// Exit status of f() run in a child as `uid` with the supplementary groups `groups`.
int as_user(uid_t uid, std::vector<gid_t> groups, const std::function<int()>& f) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(groups.size(), groups.data()) != 0 || ::setresgid(uid, uid, uid) != 0 ||
        ::setresuid(uid, uid, uid) != 0)
      ::_exit(100);
    ::_exit(f());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200;
}

// 0: connected and registered; 1: refused for permission; else what went wrong.
int connect_and_register(const std::string& path) {
  rdmad_client* c = nullptr;
  const auto st = rdmad_connect(path.c_str(), &c);
  if (st == RDMAD_ERR_PERMISSION) return 1;
  if (st != RDMAD_OK) return 2;
  rdmad_host_buffer buf;
  if (rdmad_alloc_host(4096, &buf) != RDMAD_OK) return 3;
  rdmad_mr* mr = nullptr;
  if (rdmad_register_host(c, buf.fd, 0, 4096, RDMAD_ACCESS_LOCAL_WRITE, 0, &mr) != RDMAD_OK) return 4;
  if (rdmad_deregister(c, mr) != RDMAD_OK) return 5;
  rdmad_disconnect(c);
  return 0;
}

class SocketGroup : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (to drop CAP_CHOWN and to act as other uids)";
    ASSERT_NE(users_gid(), static_cast<gid_t>(-1)) << "no group 'users' in /etc/group";
  }
  // A directory for the socket, traversable by everyone (the socket's mode and group are the gate).
  std::string socket_dir(const std::string& name, bool setgid) {
    const std::string d = tmp_.path() + "/" + name;
    fs::create_directories(d);
    if (setgid) {
      EXPECT_EQ(::chown(d.c_str(), 0, users_gid()), 0);
    }
    EXPECT_EQ(::chmod(d.c_str(), setgid ? 02755 : 0755), 0);
    return d;
  }
  TempDir tmp_;
};

// The socket made in a set-group-id directory has the group already: no chown call is made (the
// unit's syscall filter refuses every one, even a chown to the group the file has).
TEST_F(SocketGroup, SetgidDirectoryGivesTheGroupWithoutChown) {
  const std::string dir = socket_dir("setgid", true);
  ServerWithoutChown srv(dir, "users", false, true);
  ASSERT_EQ(srv.error(), "");
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/rdmad.sock").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, users_gid());
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  EXPECT_EQ(as_user(kMember, {users_gid()}, [&] { return connect_and_register(dir + "/rdmad.sock"); }), 0);
  EXPECT_EQ(as_user(kOutsider, {}, [&] { return connect_and_register(dir + "/rdmad.sock"); }), 1);
}

TEST_F(SocketGroup, AMemberOfTheGroupGivesItWithoutChown) {
  const std::string dir = socket_dir("member", false);
  ServerWithoutChown srv(dir, std::to_string(users_gid()), true);  // a number works as well as the name
  ASSERT_EQ(srv.error(), "");
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/rdmad.sock").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, users_gid());
  EXPECT_EQ(as_user(kMember, {users_gid()}, [&] { return connect_and_register(dir + "/rdmad.sock"); }), 0);
  EXPECT_EQ(as_user(kOutsider, {}, [&] { return connect_and_register(dir + "/rdmad.sock"); }), 1);
}

TEST_F(SocketGroup, OtherwiseTheErrorNamesTheKeyAndTheWaysOut) {
  const std::string dir = socket_dir("plain", false);
  ServerWithoutChown srv(dir, "users", false);
  const std::string e = srv.error();
  EXPECT_NE(e.find("[ipc] socket_group = \"users\""), std::string::npos) << e;
  EXPECT_NE(e.find("not a member of it and has no CAP_CHOWN"), std::string::npos) << e;
  EXPECT_NE(e.find("SocketGroup="), std::string::npos) << e;
}

}  // namespace
}  // namespace rdmad::test
