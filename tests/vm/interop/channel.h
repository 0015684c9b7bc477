#pragma once
// The control channel of the interop peers: one TCP connection carrying lines of text, every wait
// bounded by a deadline. The soft side (on the host, in the harness's namespace) listens; the rxe
// side (in the guest) connects, retrying until the listener is there.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace rdmad::vm {

using Clock = std::chrono::steady_clock;

class Channel {
 public:
  Channel() = default;
  explicit Channel(int fd) : fd_(fd) {}
  Channel(Channel&& o) noexcept : fd_(o.fd_), buf_(std::move(o.buf_)) { o.fd_ = -1; }
  Channel& operator=(Channel&& o) noexcept;
  ~Channel();

  /// Connects to host:port, retrying refused connections until the deadline.
  static std::optional<Channel> connect(const std::string& host, int port, Clock::time_point deadline,
                                        std::string* error);
  bool valid() const { return fd_ >= 0; }
  /// Sends one line (a newline is added).
  bool send(const std::string& line);
  /// The next line, or nullopt at EOF, on an error or when the deadline passes (*error says which).
  std::optional<std::string> receive(Clock::time_point deadline, std::string* error);

 private:
  int fd_ = -1;
  std::string buf_;
};

/// A listening socket on address:port.
class Listener {
 public:
  Listener(const std::string& address, int port, std::string* error);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  bool valid() const { return fd_ >= 0; }
  /// The next connection, or nullopt when the deadline passes.
  std::optional<Channel> accept(Clock::time_point deadline, std::string* error);

 private:
  int fd_ = -1;
};

/// The words of a line.
std::vector<std::string> words(const std::string& line);

}  // namespace rdmad::vm
