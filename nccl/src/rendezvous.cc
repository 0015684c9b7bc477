#include "rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace rdmad::nccl {
namespace {

void fill_random(void* p, size_t n) {
  auto* b = static_cast<uint8_t*>(p);
  while (n > 0) {
    ssize_t r = getrandom(b, n, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      std::abort();  // no randomness: nothing secret can be made
    }
    b += r;
    n -= static_cast<size_t>(r);
  }
}

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

socklen_t length_of(const sockaddr_storage& a) {
  return a.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

void set_options(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// Constant time: how much of a guess matches must not show in when the answer comes.
bool same_secret(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < sizeof(Secret); ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

Secret random_secret() {
  Secret s;
  fill_random(s.data(), s.size());
  return s;
}

uint64_t random_u64() {
  uint64_t v;
  fill_random(&v, sizeof(v));
  return v;
}

bool interface_matches(const std::string& spec_in, const std::string& name) {
  std::string spec = spec_in;
  bool exclude = false, exact = false;
  if (!spec.empty() && spec[0] == '^') {
    exclude = true;
    spec.erase(0, 1);
  }
  if (!spec.empty() && spec[0] == '=') {
    exact = true;
    spec.erase(0, 1);
  }
  bool listed = false;
  for (const auto& p : split(spec))
    if (exact ? name == p : name.compare(0, p.size(), p) == 0) listed = true;
  return exclude ? !listed : listed;
}

std::string address_string(const sockaddr_storage& a, bool with_port) {
  char text[INET6_ADDRSTRLEN] = "";
  uint16_t port = 0;
  if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof(text));
    port = ntohs(v6.sin6_port);
    return with_port ? "[" + std::string(text) + "]:" + std::to_string(port) : std::string(text);
  }
  const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
  inet_ntop(AF_INET, &v4.sin_addr, text, sizeof(text));
  port = ntohs(v4.sin_port);
  return with_port ? std::string(text) + ":" + std::to_string(port) : std::string(text);
}

bool choose_address(sockaddr_storage* out, std::string* error, std::string* interface_name) {
  const char* spec = std::getenv("RDMAD_NCCL_SOCKET_IFNAME");
  if (spec == nullptr || *spec == '\0') spec = std::getenv("NCCL_SOCKET_IFNAME");
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    *error = errno_text("getifaddrs");
    return false;
  }
  // Pass 0: IPv4, pass 1: IPv6; without a spec, loopback only when nothing else is up.
  const bool have_spec = spec != nullptr && *spec != '\0';
  bool found = false;
  for (int allow_loopback = 0; allow_loopback < 2 && !found; ++allow_loopback) {
    for (int family : {AF_INET, AF_INET6}) {
      for (ifaddrs* i = list; i != nullptr && !found; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != family || (i->ifa_flags & IFF_UP) == 0) continue;
        const std::string name = i->ifa_name;
        const bool loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
        if (have_spec) {
          if (!interface_matches(spec, name)) continue;
        } else if (name.rfind("docker", 0) == 0 || (loopback && allow_loopback == 0)) {
          continue;
        }
        if (family == AF_INET6) {
          const auto* v6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
          if (IN6_IS_ADDR_LINKLOCAL(&v6->sin6_addr)) continue;  // needs a scope the peer cannot know
        }
        std::memset(out, 0, sizeof(*out));
        std::memcpy(out, i->ifa_addr, family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
        *interface_name = name;
        found = true;
      }
      if (found) break;
    }
    if (have_spec) break;
  }
  freeifaddrs(list);
  if (!found)
    *error = have_spec ? std::string("no interface that is up matches ") + spec : "no network interface is up";
  return found;
}

Listener::~Listener() {
  for (auto& p : pending_) close(p.fd);
  for (auto& a : ready_) close(a.fd);
  if (fd_ >= 0) close(fd_);
}

bool Listener::open(const sockaddr_storage& address, std::string* error) {
  address_ = address;
  if (address_.ss_family == AF_INET6)
    reinterpret_cast<sockaddr_in6&>(address_).sin6_port = 0;
  else
    reinterpret_cast<sockaddr_in&>(address_).sin_port = 0;
  fd_ = socket(address_.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    *error = errno_text("socket");
    return false;
  }
  socklen_t len = length_of(address_);
  if (bind(fd_, reinterpret_cast<sockaddr*>(&address_), len) != 0 || listen(fd_, 64) != 0 ||
      getsockname(fd_, reinterpret_cast<sockaddr*>(&address_), &len) != 0) {
    *error = errno_text(("listening on " + address_string(address_)).c_str());
    return false;
  }
  secret_ = random_secret();
  comm_id_ = random_u64();
  return true;
}

void Listener::fill(WireHandle* h, const std::string& node) const {
  std::memset(h, 0, sizeof(*h));
  h->magic = kHandleMagic;
  h->version = kHandleVersion;
  h->family = static_cast<uint8_t>(address_.ss_family);
  if (address_.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address_);
    h->port = v6.sin6_port;
    std::memcpy(h->address, &v6.sin6_addr, 16);
  } else {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address_);
    h->port = v4.sin_port;
    std::memcpy(h->address, &v4.sin_addr, 4);
  }
  std::memcpy(h->secret, secret_.data(), secret_.size());
  h->comm_id = comm_id_;
  std::strncpy(h->node, node.c_str(), sizeof(h->node) - 1);
  h->stage_id = 0;
}

std::optional<Listener::Accepted> Listener::poll() {
  const auto now = Clock::now();
  for (size_t n = 0; n < kMaxAcceptsPerPoll; ++n) {
    int c = accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) break;  // EAGAIN, or a failure the next call retries
    set_options(c);
    pending_.push_back(Pending{c, now});
  }
  for (size_t i = 0; i < pending_.size();) {
    Pending& p = pending_[i];
    auto* dst = reinterpret_cast<uint8_t*>(&p.hello);
    ssize_t r = p.got < sizeof(Hello) ? recv(p.fd, dst + p.got, sizeof(Hello) - p.got, 0) : 0;
    bool drop = false;
    if (r > 0) p.got += static_cast<size_t>(r);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) drop = true;
    if (now - p.started > kHandshakeTimeout) drop = true;
    if (!drop && p.got == sizeof(Hello)) {
      const Hello& h = p.hello;
      const bool good = h.magic == kHelloMagic && h.version == kHandleVersion &&
                        same_secret(h.secret, secret_.data()) &&
                        std::memchr(h.node, '\0', sizeof(h.node)) != nullptr && h.node[0] != '\0';
      uint8_t ack = kAccepted;
      if (good && send(p.fd, &ack, 1, MSG_NOSIGNAL) == 1) {
        ready_.push_back(Accepted{p.fd, h.node});
        pending_.erase(pending_.begin() + static_cast<long>(i));
        continue;
      }
      drop = true;  // a stranger, or the other side went away
    }
    if (drop) {
      close(p.fd);
      pending_.erase(pending_.begin() + static_cast<long>(i));
      continue;
    }
    ++i;
  }
  // Over the bound: the oldest go (those that have sent least of a hello the longest).
  while (pending_.size() > kMaxPending) {
    close(pending_.front().fd);
    pending_.erase(pending_.begin());
  }
  if (ready_.empty()) return std::nullopt;
  Accepted a = ready_.front();
  ready_.pop_front();
  return a;
}

Connecting::~Connecting() {
  if (fd_ >= 0) close(fd_);
}

bool Connecting::start(const WireHandle& h, const std::string& own_node, std::string* error) {
  if (h.magic != kHandleMagic || h.version != kHandleVersion || (h.family != AF_INET && h.family != AF_INET6)) {
    *error = "the handle is not an rdmad plugin handle (another NCCL_NET plugin on the listening side?)";
    return false;
  }
  sockaddr_storage a{};
  a.ss_family = h.family;
  if (h.family == AF_INET6) {
    auto& v6 = reinterpret_cast<sockaddr_in6&>(a);
    v6.sin6_port = h.port;
    std::memcpy(&v6.sin6_addr, h.address, 16);
  } else {
    auto& v4 = reinterpret_cast<sockaddr_in&>(a);
    v4.sin_port = h.port;
    std::memcpy(&v4.sin_addr, h.address, 4);
  }
  fd_ = socket(h.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    *error = errno_text("socket");
    return false;
  }
  set_options(fd_);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&a), length_of(a)) != 0 && errno != EINPROGRESS) {
    *error = errno_text(("connecting to " + address_string(a)).c_str());
    return false;
  }
  hello_.magic = kHelloMagic;
  hello_.version = kHandleVersion;
  std::memcpy(hello_.secret, h.secret, sizeof(hello_.secret));
  std::strncpy(hello_.node, own_node.c_str(), sizeof(hello_.node) - 1);
  deadline_ = Clock::now() + Listener::kHandshakeTimeout;
  return true;
}

Connecting::Step Connecting::step(std::string* error) {
  if (Clock::now() > deadline_) {
    *error = "the listening rank did not answer within 30 s";
    return Step::kFailed;
  }
  if (!connected_) {
    pollfd p{fd_, POLLOUT, 0};
    if (::poll(&p, 1, 0) <= 0) return Step::kPending;
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      *error = std::string("connecting to the listening rank: ") + std::strerror(err);
      return Step::kFailed;
    }
    connected_ = true;
  }
  while (sent_ < sizeof(hello_)) {
    ssize_t w = send(fd_, reinterpret_cast<const uint8_t*>(&hello_) + sent_, sizeof(hello_) - sent_, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EAGAIN || errno == EINTR) return Step::kPending;
      *error = errno_text("sending the hello");
      return Step::kFailed;
    }
    sent_ += static_cast<size_t>(w);
  }
  uint8_t ack = 0;
  ssize_t r = recv(fd_, &ack, 1, 0);
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) return Step::kPending;
  if (r != 1 || ack != kAccepted) {
    *error = "the listening rank refused the connection (a handle of another comm, or it closed)";
    return Step::kFailed;
  }
  return Step::kDone;
}

int Connecting::take_fd() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

bool peer_closed(int fd) {
  uint8_t b;
  ssize_t r = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r > 0) return false;
  if (r == 0) return true;
  return errno != EAGAIN && errno != EINTR;
}

}  // namespace rdmad::nccl
