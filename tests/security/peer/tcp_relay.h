#pragma once
// An on-path TCP relay for tests: listens on 127.0.0.1, forwards every connection to a target
// port and records every byte of each connection in both directions, so a test can look for
// secrets in what crossed the wire or replay what a client sent. One thread, poll(2).
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rdmad::peer::test {

class TcpRelay {
 public:
  struct Recorded {
    std::string to_server;  // what the client sent
    std::string to_client;  // what the server answered
  };

  explicit TcpRelay(uint16_t target_port);
  ~TcpRelay();
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  uint16_t port() const { return port_; }
  /// Every connection relayed so far, in accept order.
  std::vector<Recorded> connections() const;
  /// All bytes of all connections, both directions.
  std::string everything() const;

 private:
  struct Pipe {
    int client = -1;
    int server = -1;
    size_t index = 0;
  };
  void run();

  uint16_t target_;
  uint16_t port_ = 0;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  mutable std::mutex mu_;
  std::vector<Recorded> recorded_;
  std::thread thread_;
};

/// Whether `needle` occurs in `haystack` (bytes, not text).
inline bool contains_bytes(const std::string& haystack, const void* needle, size_t n) {
  return haystack.find(std::string(static_cast<const char*>(needle), n)) != std::string::npos;
}

}  // namespace rdmad::peer::test
