// librdmad against a daemon that is stopped, dead or mute: connecting fails within the stated
// bound instead of blocking, and a call whose daemon goes away mid-request fails with
// RDMAD_ERR_DAEMON_GONE at once rather than after the reconnect timeout (5 s by default).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>

#include "fake_daemon.h"
#include "rdmad/rdmad.h"

namespace rdmad::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::chrono::milliseconds since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t);
}

int raw_connect(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

TEST(ClientConnect, LeftoverSocketFileFailsAtOnce) {
  FakeDaemon d;
  ASSERT_TRUE(d.bound());
  d.die_leaving_socket_file();  // the file is there, nobody listens: ECONNREFUSED
  Watchdog w(5s, "rdmad_connect to a leftover socket file");
  const auto t = Clock::now();
  rdmad_client* c = nullptr;
  EXPECT_EQ(rdmad_connect(d.path().c_str(), &c), RDMAD_ERR_CONNECTION);
  EXPECT_EQ(c, nullptr);
  EXPECT_LT(since(t), 500ms);
  EXPECT_NE(std::string(rdmad_last_error(nullptr)).find(d.path()), std::string::npos) << rdmad_last_error(nullptr);
}

TEST(ClientConnect, ListenerThatNeverAnswersHelloTimesOut) {
  FakeDaemon d;  // listens, never accepts: the connection waits in its backlog, hello unanswered
  ASSERT_TRUE(d.bound());
  Watchdog w(10s, "rdmad_connect to a listener that never answers");
  auto t = Clock::now();
  rdmad_client* c = nullptr;
  EXPECT_EQ(rdmad_connect_timeout(d.path().c_str(), 300, &c), RDMAD_ERR_CONNECTION);
  EXPECT_GE(since(t), 250ms);
  EXPECT_LT(since(t), 1500ms);
  EXPECT_NE(std::string(rdmad_last_error(nullptr)).find("hello"), std::string::npos) << rdmad_last_error(nullptr);
  // The default bound: RDMAD_DEFAULT_CONNECT_TIMEOUT_MS.
  t = Clock::now();
  EXPECT_EQ(rdmad_connect(d.path().c_str(), &c), RDMAD_ERR_CONNECTION);
  EXPECT_GE(since(t), std::chrono::milliseconds(RDMAD_DEFAULT_CONNECT_TIMEOUT_MS - 100));
  EXPECT_LT(since(t), std::chrono::milliseconds(RDMAD_DEFAULT_CONNECT_TIMEOUT_MS + 1500));
}

// $RDMAD_CONNECT_TIMEOUT_MS bounds rdmad_connect instead of the default (a slow first start of a
// socket-activated daemon); a value out of range or not a number leaves the default.
TEST(ClientConnect, EnvironmentSetsTheDefaultConnectTimeout) {
  FakeDaemon d;
  ASSERT_TRUE(d.bound());
  Watchdog w(20s, "rdmad_connect with $RDMAD_CONNECT_TIMEOUT_MS");
  rdmad_client* c = nullptr;
  ::setenv("RDMAD_CONNECT_TIMEOUT_MS", "300", 1);
  auto t = Clock::now();
  EXPECT_EQ(rdmad_connect(d.path().c_str(), &c), RDMAD_ERR_CONNECTION);
  EXPECT_GE(since(t), 250ms);
  EXPECT_LT(since(t), 1500ms);
  ::setenv("RDMAD_CONNECT_TIMEOUT_MS", "0", 1);
  t = Clock::now();
  EXPECT_EQ(rdmad_connect(d.path().c_str(), &c), RDMAD_ERR_CONNECTION);
  EXPECT_GE(since(t), std::chrono::milliseconds(RDMAD_DEFAULT_CONNECT_TIMEOUT_MS - 100));
  ::unsetenv("RDMAD_CONNECT_TIMEOUT_MS");
}

TEST(ClientConnect, FullBacklogTimesOutInsteadOfBlocking) {
  FakeDaemon d(0);  // backlog 0: one connection waits, the next finds it full
  ASSERT_TRUE(d.bound());
  const int first = raw_connect(d.path());
  ASSERT_GE(first, 0);
  Watchdog w(10s, "rdmad_connect to a listener with a full backlog");
  const auto t = Clock::now();
  rdmad_client* c = nullptr;
  EXPECT_EQ(rdmad_connect_timeout(d.path().c_str(), 300, &c), RDMAD_ERR_CONNECTION);
  EXPECT_LT(since(t), 1500ms);
  ::close(first);
}

TEST(ClientConnect, AnsweringDaemonConnects) {
  FakeDaemon d;
  auto daemon = std::async(std::launch::async, [&] {
    int c = d.accept_client();
    return c >= 0 && FakeDaemon::answer_query_nics(c);
  });
  rdmad_client* c = nullptr;
  ASSERT_EQ(rdmad_connect_timeout(d.path().c_str(), 2000, &c), RDMAD_OK) << rdmad_last_error(nullptr);
  size_t n = 99;
  EXPECT_EQ(rdmad_query_nics(c, nullptr, 0, &n), RDMAD_OK) << rdmad_last_error(c);
  EXPECT_EQ(n, 0u);
  EXPECT_TRUE(daemon.get());
  rdmad_disconnect(c);
}

// The daemon reads the request and stops (SIGTERM: listener closed and unlinked, then the
// connection): the call fails with DAEMON_GONE at once, not after the 5 s reconnect timeout.
TEST(ClientInFlight, DaemonStoppingMidRequestIsDaemonGone) {
  FakeDaemon d;
  std::promise<int> conn;
  auto daemon = std::async(std::launch::async, [&] {
    int c = d.accept_client();
    conn.set_value(c);
    Frame f;
    if (c < 0 || !FakeDaemon::read_frame(c, &f)) return false;
    d.stop_listening();
    d.close_conn(c);
    return true;
  });
  rdmad_client* c = nullptr;
  ASSERT_EQ(rdmad_connect(d.path().c_str(), &c), RDMAD_OK) << rdmad_last_error(nullptr);
  ASSERT_GE(conn.get_future().get(), 0);
  Watchdog w(5s, "a call whose daemon stopped mid-request");
  const auto t = Clock::now();
  size_t n = 0;
  EXPECT_EQ(rdmad_query_nics(c, nullptr, 0, &n), RDMAD_ERR_DAEMON_GONE);
  EXPECT_LT(since(t), 1s);
  EXPECT_NE(std::string(rdmad_last_error(c)).find("stopped or died"), std::string::npos) << rdmad_last_error(c);
  EXPECT_STREQ(rdmad_strerror(RDMAD_ERR_DAEMON_GONE), "the daemon stopped or died with the request in flight");
  EXPECT_TRUE(daemon.get());
  rdmad_disconnect(c);
}

// Killed with the request still unread (SIGKILL leaves the socket file; the kernel resets the
// connection): DAEMON_GONE at once as well.
TEST(ClientInFlight, DaemonKilledWithRequestUnreadIsDaemonGone) {
  FakeDaemon d;
  std::promise<int> conn;
  auto daemon = std::async(std::launch::async, [&] {
    int c = d.accept_client();
    conn.set_value(c);
    if (c < 0 || !FakeDaemon::wait_readable(c, 2000)) return false;
    d.die_leaving_socket_file();
    return true;
  });
  rdmad_client* c = nullptr;
  ASSERT_EQ(rdmad_connect(d.path().c_str(), &c), RDMAD_OK) << rdmad_last_error(nullptr);
  ASSERT_GE(conn.get_future().get(), 0);
  Watchdog w(5s, "a call whose daemon was killed mid-request");
  const auto t = Clock::now();
  size_t n = 0;
  EXPECT_EQ(rdmad_query_nics(c, nullptr, 0, &n), RDMAD_ERR_DAEMON_GONE);
  EXPECT_LT(since(t), 1s);
  EXPECT_TRUE(daemon.get());
  rdmad_disconnect(c);
}

// The same daemon instance closed just this connection with the request unread (an idle
// timeout racing the request): it never acted on it, so the library sends it again.
TEST(ClientInFlight, SameInstanceClosingWithRequestUnreadGetsItAgain) {
  FakeDaemon d;
  auto daemon = std::async(std::launch::async, [&] {
    int c = d.accept_client(0xabc);
    if (c < 0 || !FakeDaemon::wait_readable(c, 2000)) return false;
    d.close_conn(c);  // unread: the client sees ECONNRESET
    int again = d.accept_client(0xabc);
    return again >= 0 && FakeDaemon::answer_query_nics(again);
  });
  rdmad_client* c = nullptr;
  ASSERT_EQ(rdmad_connect(d.path().c_str(), &c), RDMAD_OK) << rdmad_last_error(nullptr);
  size_t n = 99;
  EXPECT_EQ(rdmad_query_nics(c, nullptr, 0, &n), RDMAD_OK) << rdmad_last_error(c);
  EXPECT_EQ(n, 0u);
  EXPECT_TRUE(daemon.get());
  rdmad_disconnect(c);
}

// A restarted daemon (another instance id) answers the library's one look: the request it had is
// gone with the old one, and the call says so instead of running it on the new daemon.
TEST(ClientInFlight, RestartedDaemonIsDaemonGoneAndTheNextCallWorks) {
  FakeDaemon d;
  auto daemon = std::async(std::launch::async, [&] {
    int c = d.accept_client(1);
    Frame f;
    if (c < 0 || !FakeDaemon::read_frame(c, &f)) return false;
    d.close_conn(c);
    int again = d.accept_client(2);
    return again >= 0 && FakeDaemon::answer_query_nics(again);
  });
  rdmad_client* c = nullptr;
  ASSERT_EQ(rdmad_connect(d.path().c_str(), &c), RDMAD_OK) << rdmad_last_error(nullptr);
  size_t n = 0;
  EXPECT_EQ(rdmad_query_nics(c, nullptr, 0, &n), RDMAD_ERR_DAEMON_GONE);
  EXPECT_NE(std::string(rdmad_last_error(c)).find("restarted"), std::string::npos) << rdmad_last_error(c);
  EXPECT_EQ(rdmad_query_nics(c, nullptr, 0, &n), RDMAD_OK) << rdmad_last_error(c);  // on the new one
  EXPECT_TRUE(daemon.get());
  rdmad_disconnect(c);
}

// A connection found closed before the request left is the restart case: reconnect and retry.
TEST(ClientInFlight, ConnectionFoundClosedBeforeSendingReconnects) {
  FakeDaemon d;
  std::promise<void> closed;
  auto daemon = std::async(std::launch::async, [&] {
    int c = d.accept_client(1);
    if (c < 0) return false;
    d.close_conn(c);
    closed.set_value();
    int again = d.accept_client(2);
    return again >= 0 && FakeDaemon::answer_query_nics(again);
  });
  rdmad_client* c = nullptr;
  ASSERT_EQ(rdmad_connect(d.path().c_str(), &c), RDMAD_OK) << rdmad_last_error(nullptr);
  closed.get_future().get();
  size_t n = 99;
  EXPECT_EQ(rdmad_query_nics(c, nullptr, 0, &n), RDMAD_OK) << rdmad_last_error(c);
  EXPECT_TRUE(daemon.get());
  rdmad_disconnect(c);
}

}  // namespace
}  // namespace rdmad::test
