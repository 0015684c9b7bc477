#pragma once
// A stand-in for systemd's side of sd_notify for tests of a real daemon process: a datagram socket
// for $NOTIFY_SOCKET, read by a thread of its own (so a daemon that sends thousands of messages is
// never held up), that keeps what the daemon hands over with FDSTORE=1 / FDNAME= and drops what
// FDSTOREREMOVE=1 names, as systemd's file-descriptor store does (sd_notify(3)), and records every
// message. The next start of the daemon gets the kept descriptors as systemd passes them
// (listen_fds(), listen_fdnames_env()).
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rdmad::test {

class FakeFdStore {
 public:
  explicit FakeFdStore(std::string path);
  ~FakeFdStore();
  FakeFdStore(const FakeFdStore&) = delete;
  FakeFdStore& operator=(const FakeFdStore&) = delete;

  std::string notify_env() const { return "NOTIFY_SOCKET=" + path_; }
  // The kept descriptors in a stable order, and the LISTEN_FDNAMES entry naming them (valid while
  // nothing is stored or removed in between).
  std::vector<int> listen_fds() const;
  std::string listen_fdnames_env() const;
  size_t kept() const;
  size_t messages_containing(const std::string& needle) const;
  // Polls until kept() == n or the deadline passes.
  bool wait_kept(size_t n, std::chrono::milliseconds deadline) const;
  bool wait_message(const std::string& needle, std::chrono::milliseconds deadline) const;

 private:
  void run();
  std::string path_;
  int fd_ = -1;
  int stop_[2] = {-1, -1};
  mutable std::mutex mu_;
  std::multimap<std::string, int> kept_;
  std::vector<std::string> messages_;
  std::thread thread_;
};

}  // namespace rdmad::test
