// rdmad-supervise with a real rdmad: the restart it is asked for and the one after a crash keep a
// connected client's registration; only the child may hand it descriptors; it stops with the child.
#include <signal.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <regex>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "rdmad/rdmad.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace rdmad::test {
namespace {

using namespace std::chrono_literals;

size_t occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Polls until `needle` is in `p`'s output `n` times or the deadline passes.
bool output_count(Subprocess& p, const std::string& needle, size_t n, std::chrono::milliseconds deadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (occurrences(p.output(), needle) < n) {
    if (std::chrono::steady_clock::now() >= end) return false;
    usleep(10'000);
  }
  return true;
}

// The pid the supervisor said it started the n-th time (1-based), or -1.
pid_t started_pid(const std::string& out, size_t n) {
  std::regex re(R"(rdmad-supervise: started pid=(\d+))");
  size_t i = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
    if (++i == n) return std::stoi((*it)[1]);
  return -1;
}

class Supervise : public ::testing::Test {
 protected:
  void start() {
    // No [[nic]]: the embedded soft NIC on loopback.
    config_ = dir_.write("rdmad.toml", fmt::format("[daemon]\nruntime_dir = \"{0}/run\"\nsocket_path = \"{0}/run/rdmad.sock\"\n"
                                                   "[metrics]\nlisten = \"127.0.0.1:0\"\n",
                                                   dir_.path()));
    proc_ = std::make_unique<Subprocess>(std::vector<std::string>{binary("tools/supervise/rdmad-supervise"),
                                                                  "--runtime-dir", dir_.path() + "/run",
                                                                  "--restart-delay-ms", "50", "--", binary("daemon/rdmad"),
                                                                  "--config", config_});
    ASSERT_TRUE(output_count(*proc_, "] ready", 1, 15s)) << proc_->output();
  }
  std::string socket() const { return dir_.path() + "/run/rdmad.sock"; }

  TempDir dir_;
  std::string config_;
  std::unique_ptr<Subprocess> proc_;
};

TEST_F(Supervise, RestartsAskedForAndAfterACrashKeepTheClientsRegistration) {
  ASSERT_NO_FATAL_FAILURE(start());
  rdmad_client* client = nullptr;
  ASSERT_EQ(rdmad_connect(socket().c_str(), &client), RDMAD_OK) << rdmad_last_error(nullptr);
  rdmad_host_buffer buf{};
  rdmad_mr* mr = nullptr;
  ASSERT_EQ(rdmad_alloc_host(1 << 20, &buf), RDMAD_OK);
  ASSERT_EQ(rdmad_register_host(client, buf.fd, 0, 1 << 20, RDMAD_ACCESS_LOCAL_WRITE, 0, &mr), RDMAD_OK)
      << rdmad_last_error(client);
  const uint64_t handle = rdmad_mr_handle(mr);
  auto same_session = [&](const char* after) {
    rdmad_registration_info regs[4];
    size_t count = 0;
    ASSERT_EQ(rdmad_list_registrations(client, regs, 4, &count), RDMAD_OK) << rdmad_last_error(client);
    ASSERT_EQ(count, 1u) << after << "\n" << proc_->output();
    EXPECT_EQ(regs[0].handle, handle) << after;
    EXPECT_EQ(rdmad_mr_is_lost(mr), 0) << after;
  };

  proc_->signal(SIGUSR1);  // as `systemctl restart`
  ASSERT_TRUE(output_count(*proc_, "] ready", 2, 15s)) << proc_->output();
  EXPECT_NE(proc_->output().find("started pid=" + std::to_string(started_pid(proc_->output(), 2)) + " stored_fds=1"),
            std::string::npos)
      << proc_->output();
  same_session("after the restart asked for");

  const pid_t child = started_pid(proc_->output(), 2);
  ASSERT_GT(child, 0);
  ::kill(child, SIGKILL);  // a crash: nothing written at exit
  ASSERT_TRUE(output_count(*proc_, "] ready", 3, 15s)) << proc_->output();
  EXPECT_NE(proc_->output().find("exited code=137 unasked, restarting in 50 ms"), std::string::npos) << proc_->output();
  same_session("after a crash");

  rdmad_deregister(client, mr);
  rdmad_free_host(&buf);
  rdmad_disconnect(client);
  proc_->signal(SIGTERM);
  EXPECT_EQ(proc_->wait_exit(10s), 0) << proc_->output();
  EXPECT_NE(proc_->output().find("rdmad-supervise: stopped code=0"), std::string::npos) << proc_->output();
}

// Another process on the machine cannot put descriptors into (or take them out of) the store.
TEST_F(Supervise, OnlyTheChildMayUseTheNotifySocket) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::string path = dir_.path() + "/run/supervise/notify.sock";
  int s = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  const std::string msg = "FDSTORE=1\nFDNAME=mem-999";
  iovec iov{const_cast<char*>(msg.data()), msg.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_name = &addr;
  m.msg_namelen = sizeof addr;
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  std::memcpy(CMSG_DATA(c), &devnull, sizeof devnull);
  ASSERT_EQ(::sendmsg(s, &m, 0), static_cast<ssize_t>(msg.size())) << std::strerror(errno);
  ::close(devnull);
  ::close(s);
  EXPECT_TRUE(proc_->wait_for_output("notification from pid " + std::to_string(::getpid()) + " refused (not the child)", 5s))
      << proc_->output();
  proc_->signal(SIGUSR1);
  ASSERT_TRUE(output_count(*proc_, "] ready", 2, 15s)) << proc_->output();
  EXPECT_NE(proc_->output().find("stored_fds=0"), std::string::npos) << proc_->output();
}

TEST(SuperviseUsage, NoCommandIsAUsageError) {
  Subprocess none({binary("tools/supervise/rdmad-supervise")});
  EXPECT_EQ(none.wait_exit(10s), 2);
  EXPECT_NE(none.output().find("no command to run"), std::string::npos) << none.output();
  Subprocess bad({binary("tools/supervise/rdmad-supervise"), "--max-restarts", "many", "--", "true"});
  EXPECT_EQ(bad.wait_exit(10s), 2);
  EXPECT_NE(bad.output().find("--max-restarts: invalid value \"many\""), std::string::npos) << bad.output();
  Subprocess help({binary("tools/supervise/rdmad-supervise"), "--help"});
  EXPECT_EQ(help.wait_exit(10s), 0);
  EXPECT_NE(help.output().find("Example (a container's entry point)"), std::string::npos) << help.output();
}

}  // namespace
}  // namespace rdmad::test
