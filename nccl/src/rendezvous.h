// How a connecting rank tells a listening one who it is. NCCL carries the listener's handle out of
// band (its bootstrap); the handle names the listener's node, a TCP address and a random secret. The
// connecting rank opens a TCP connection to that address and sends its own node id with the secret;
// the listener answers one byte. The data never crosses this connection: it goes through rdmad
// flows between the two nodes' daemons (authenticated by the peer channel). The connection stays
// open only as a sign of life of the other process (its end closing fails that comm's requests).
#pragma once

#include <sys/socket.h>

#include <array>
#include <chrono>
#include <cstddef>  // offsetof
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "abi.h"
#include "rdmad/rdmad.h"

namespace rdmad::nccl {

using Clock = std::chrono::steady_clock;
using Secret = std::array<uint8_t, 16>;

// NCCL's handle buffer as this plugin fills it.
struct WireHandle {
  uint32_t magic;  // kHandleMagic
  uint8_t version;
  uint8_t family;  // AF_INET or AF_INET6
  uint16_t port;   // network order
  uint8_t address[16];
  uint8_t secret[16];
  uint64_t comm_id;  // names the comm's flow channels (with the tag)
  char node[RDMAD_NODE_ID_BYTES];  // the listener's node id
  // The connecting process's own progress: NCCL calls connect again with the same buffer until the
  // comm is up. A random id of the plugin's table of connects in progress, never a pointer: these
  // bytes came from another node, and an id that names no connect of this handle starts a new one.
  uint64_t stage_id;
};
static_assert(sizeof(WireHandle) == 120 && sizeof(WireHandle) <= abi::kHandleMaxBytes);
inline constexpr size_t kHandleIdentityBytes = offsetof(WireHandle, stage_id);  // what the listener wrote
inline constexpr uint32_t kHandleMagic = 0x52444e43;  // "RDNC"
inline constexpr uint8_t kHandleVersion = 2;  // 2: stage_id (was a pointer)

// The hello a connecting rank sends.
struct Hello {
  uint32_t magic;  // kHelloMagic
  uint8_t version;
  uint8_t reserved[3];
  uint8_t secret[16];
  char node[RDMAD_NODE_ID_BYTES];
};
static_assert(sizeof(Hello) == 88);
inline constexpr uint32_t kHelloMagic = 0x52444e48;  // "RDNH"
inline constexpr uint8_t kAccepted = 1;

Secret random_secret();
uint64_t random_u64();

// The address the listening socket binds: $RDMAD_NCCL_SOCKET_IFNAME, else $NCCL_SOCKET_IFNAME (NCCL's
// syntax: comma-separated name prefixes, `^` excludes, `=` exact names), else the first interface that
// is up and not loopback or docker, else loopback.
bool choose_address(sockaddr_storage* out, std::string* error, std::string* interface_name);
bool interface_matches(const std::string& spec, const std::string& name);
std::string address_string(const sockaddr_storage& a, bool with_port = true);

// A listening socket and the connections in handshake on it (older than kHandshakeTimeout or with a
// wrong secret: closed).
class Listener {
 public:
  struct Accepted {
    int fd;
    std::string node;
  };
  // Connections that have not sent a whole hello: at most kMaxPending, the oldest closed first when
  // more come. A stranger who holds connections open cannot keep the ranks out (they would wait in
  // the kernel's backlog behind them until kHandshakeTimeout): a rank sends its hello as soon as it
  // is connected, so only a flood of more than kMaxPending connections in that moment pushes it out.
  static constexpr size_t kMaxPending = 16;
  static constexpr size_t kMaxAcceptsPerPoll = 64;
  static constexpr auto kHandshakeTimeout = std::chrono::seconds(30);

  ~Listener();
  bool open(const sockaddr_storage& address, std::string* error);
  void fill(WireHandle* h, const std::string& node) const;
  // Accepts and advances handshakes; a completed one is returned, one a call (its fd is the caller's).
  std::optional<Accepted> poll();

 private:
  struct Pending {
    int fd;
    Clock::time_point started;
    size_t got = 0;
    Hello hello{};
  };
  int fd_ = -1;
  sockaddr_storage address_{};
  Secret secret_{};
  uint64_t comm_id_ = 0;
  std::vector<Pending> pending_;
  std::deque<Accepted> ready_;  // good hellos not yet returned (they carried the secret)
};

// A connecting rank's handshake, advanced by each connect() call.
class Connecting {
 public:
  enum class Step { kPending, kDone, kFailed };
  ~Connecting();
  bool start(const WireHandle& h, const std::string& own_node, std::string* error);
  Step step(std::string* error);
  int take_fd();

 private:
  int fd_ = -1;
  bool connected_ = false;
  size_t sent_ = 0;
  Hello hello_{};
  Clock::time_point deadline_{};
};

// True when the other end of a kept rendezvous connection closed (its process ended).
bool peer_closed(int fd);

}  // namespace rdmad::nccl
