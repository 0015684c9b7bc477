// What the loader refuses to read (config::read_config_file): anything but a regular file of at
// most kMaxConfigFileBytes that only root or its owner may write. Each refusal names the file and
// comes back at once: a FIFO is never opened, /dev/zero never read to the end.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>

#include "rdmad/config/loader.h"
#include "support/temp_dir.h"

namespace rdmad::config {
namespace {

using namespace std::chrono_literals;
using rdmad::test::TempDir;

// load_file on another thread, so that a read which blocks (a FIFO opened for reading waits for
// a writer) fails the test instead of hanging it; a writer that opens and closes the FIFO then
// unblocks the stuck thread.
LoadResult load_within(const std::string& path, std::chrono::milliseconds limit) {
  auto done = std::make_shared<std::promise<LoadResult>>();
  auto result = done->get_future();
  std::thread([path, done] { done->set_value(load_file(path)); }).detach();
  if (result.wait_for(limit) != std::future_status::ready) {
    ADD_FAILURE() << "load_file(" << path << ") blocked for more than " << limit.count() << " ms";
    int w = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (w >= 0) ::close(w);
    result.wait_for(2s);
    LoadResult r;
    r.errors.push_back(Error{path, 0, 0, "", "blocked"});
    return r;
  }
  return result.get();
}

std::string only_error(const LoadResult& r) {
  EXPECT_EQ(r.errors.size(), 1u);
  return r.errors.empty() ? std::string() : r.errors.front().to_string();
}

void expect_refused(const std::string& path, const std::string& why) {
  const LoadResult r = load_within(path, 2s);
  ASSERT_FALSE(r.ok()) << path << " was accepted";
  const std::string e = only_error(r);
  EXPECT_EQ(e.rfind(path + ": ", 0), 0u) << e;  // names the file
  EXPECT_NE(e.find(why), std::string::npos) << e;
  EXPECT_EQ(r.errors.front().line, 0u);
}

TEST(ConfigFile, DirectoryIsRefused) {
  TempDir dir;
  expect_refused(dir.path(), "it is a directory, and a configuration must be a regular file");
}

TEST(ConfigFile, FifoIsRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.path() + "/rdmad.toml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_refused(fifo, "it is a FIFO");
}

TEST(ConfigFile, DevZeroIsRefused) { expect_refused("/dev/zero", "it is a character device"); }

TEST(ConfigFile, SocketIsRefused) {
  TempDir dir;
  const std::string path = dir.path() + "/s";
  int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  expect_refused(path, "it is a socket");
  ::close(s);
}

TEST(ConfigFile, SymlinkToFifoIsRefusedAndSaysSo) {
  TempDir dir;
  const std::string fifo = dir.path() + "/fifo";
  const std::string link = dir.path() + "/rdmad.toml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(::symlink(fifo.c_str(), link.c_str()), 0);
  expect_refused(link, "it is a FIFO (behind a symlink)");
}

TEST(ConfigFile, SymlinkToRegularFileIsRead) {  // how Kubernetes mounts a ConfigMap
  TempDir dir;
  const std::string real = dir.write("real.toml", "[daemon]\nlog_level = \"debug\"\n");
  const std::string link = dir.path() + "/rdmad.toml";
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  const LoadResult r = load_within(link, 2s);
  ASSERT_TRUE(r.ok()) << only_error(r);
  EXPECT_EQ(r.config.daemon.log_level, "debug");
}

TEST(ConfigFile, OversizedFileIsRefused) {
  TempDir dir;
  // Valid TOML (comments), one byte over the bound.
  std::string text(kMaxConfigFileBytes + 1, ' ');
  text[0] = '#';
  const std::string path = dir.write("big.toml", text);
  expect_refused(path, "4194305 bytes, more than the 4194304 bytes a configuration file may have");
  text.pop_back();  // exactly the bound is fine
  const std::string ok = dir.write("max.toml", text);
  const LoadResult r = load_within(ok, 5s);
  EXPECT_TRUE(r.ok()) << only_error(r);
}

TEST(ConfigFile, ReadHonoursTheBoundItIsGiven) {
  TempDir dir;
  const std::string path = dir.write("f.toml", std::string(100, '#'));
  std::string text;
  Error error;
  EXPECT_TRUE(read_config_file(path, &text, &error, 100));
  EXPECT_EQ(text, std::string(100, '#'));
  EXPECT_FALSE(read_config_file(path, &text, &error, 99));
  EXPECT_TRUE(text.empty());
  EXPECT_NE(error.to_string().find("more than the 99 bytes"), std::string::npos) << error.to_string();
}

TEST(ConfigFile, WorldWritableFileIsRefused) {
  TempDir dir;
  const std::string path = dir.write("rdmad.toml", "");
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  expect_refused(path, "every user may write it (mode 0666)");
  ASSERT_EQ(::chmod(path.c_str(), 0664), 0);  // group-writable is the operator's choice
  EXPECT_TRUE(load_within(path, 2s).ok());
}

TEST(ConfigFile, FileOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another uid";
  TempDir dir;
  const std::string path = dir.write("rdmad.toml", "");
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
  expect_refused(path, "owned by uid 65534, neither root nor this process's uid 0");
}

TEST(ConfigFile, MissingFileNamesTheFile) {
  expect_refused("/nonexistent/rdmad.toml", "cannot read file: No such file or directory");
}

TEST(ConfigFile, ErrorsInsideAFileStillNameLineAndKey) {
  TempDir dir;
  const std::string path = dir.write("bad.toml", "[daemon]\nlog_level = \"loud\"\n");
  const LoadResult r = load_within(path, 2s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(only_error(r).rfind(path + ":2:13: daemon.log_level: invalid value", 0), 0u) << only_error(r);
}

}  // namespace
}  // namespace rdmad::config
