#include "resolver.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <sys/socket.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <boost/asio/post.hpp>

namespace rdmad::peer {
namespace {

std::string ip_text(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof(buf));
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof(buf));
  }
  return buf;
}

// A/AAAA of `name` through getaddrinfo. nullopt: no such name (or no address); *error: a failure.
std::optional<std::vector<std::string>> addresses_of(const std::string& name, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &res);
  if (rc == EAI_NONAME || rc == EAI_NODATA) return std::nullopt;
  if (rc != 0) {
    *error = std::string("getaddrinfo ") + name + ": " + ::gai_strerror(rc);
    return std::vector<std::string>{};
  }
  std::vector<std::string> out;
  for (const addrinfo* a = res; a != nullptr; a = a->ai_next) {
    std::string ip = ip_text(a->ai_addr);
    if (!ip.empty()) out.push_back(std::move(ip));
  }
  ::freeaddrinfo(res);
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// SRV records of `name` through libresolv: (target, port) pairs, and the addresses the
// additional section gives for targets. Returns false with *error on a failure; an answer with no
// records (NXDOMAIN, NODATA) is true with nothing in them.
bool srv_records(const std::string& name, std::vector<std::pair<std::string, uint16_t>>* targets,
                 std::map<std::string, std::vector<std::string>>* glue, std::string* error, bool* no_such_name) {
  struct __res_state st {};
  if (::res_ninit(&st) != 0) {
    *error = "res_ninit failed (no usable resolv.conf)";
    return false;
  }
  std::vector<unsigned char> answer(65536);
  h_errno = 0;
  const int len = ::res_nquery(&st, name.c_str(), ns_c_in, ns_t_srv, answer.data(), static_cast<int>(answer.size()));
  const int herr = h_errno;
  ::res_nclose(&st);
  if (len < 0) {
    if (herr == HOST_NOT_FOUND || herr == NO_DATA) {
      *no_such_name = true;
      return true;
    }
    *error = "SRV query " + name + ": " + ::hstrerror(herr);
    return false;
  }
  ns_msg msg{};
  if (::ns_initparse(answer.data(), len, &msg) != 0) {
    *error = "SRV query " + name + ": the answer does not parse";
    return false;
  }
  for (int i = 0; i < ns_msg_count(msg, ns_s_an); ++i) {
    ns_rr rr{};
    if (::ns_parserr(&msg, ns_s_an, i, &rr) != 0) continue;
    if (ns_rr_type(rr) != ns_t_srv || ns_rr_rdlen(rr) < 7) continue;
    const unsigned char* rd = ns_rr_rdata(rr);
    const uint16_t port = static_cast<uint16_t>((rd[4] << 8) | rd[5]);
    char target[NS_MAXDNAME] = {};
    if (::dn_expand(ns_msg_base(msg), ns_msg_end(msg), rd + 6, target, sizeof(target)) < 0) continue;
    if (std::string(target).empty() || std::string(target) == ".") continue;  // "no service here"
    targets->emplace_back(lower(target), port);
  }
  for (int i = 0; i < ns_msg_count(msg, ns_s_ar); ++i) {
    ns_rr rr{};
    if (::ns_parserr(&msg, ns_s_ar, i, &rr) != 0) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    if (ns_rr_type(rr) == ns_t_a && ns_rr_rdlen(rr) == 4) {
      inet_ntop(AF_INET, ns_rr_rdata(rr), buf, sizeof(buf));
    } else if (ns_rr_type(rr) == ns_t_aaaa && ns_rr_rdlen(rr) == 16) {
      inet_ntop(AF_INET6, ns_rr_rdata(rr), buf, sizeof(buf));
    } else {
      continue;
    }
    (*glue)[lower(ns_rr_name(rr))].push_back(buf);
  }
  return true;
}

}  // namespace

Resolution resolve_now(const DiscoverTarget& target, uint16_t port) {
  const auto start = std::chrono::steady_clock::now();
  Resolution r;
  std::set<DiscoveredAddress> found;
  if (target.kind == DiscoverTarget::Kind::kAddress) {
    auto ips = addresses_of(target.name, &r.error);
    if (!ips) r.note = "no such name, or no A/AAAA record";
    if (ips)
      for (auto& ip : *ips) found.insert({ip, port});
  } else if (target.kind == DiscoverTarget::Kind::kSrv) {
    std::vector<std::pair<std::string, uint16_t>> targets;
    std::map<std::string, std::vector<std::string>> glue;
    bool none = false;
    if (srv_records(target.name, &targets, &glue, &r.error, &none)) {
      if (none || targets.empty()) r.note = "no such name, or no SRV record";
      for (const auto& [host, p] : targets) {
        if (found.size() >= kMaxDiscoveredAddresses) break;
        if (auto g = glue.find(host); g != glue.end()) {
          for (const auto& ip : g->second) found.insert({ip, p});
          continue;
        }
        std::string error;
        auto ips = addresses_of(host, &error);
        if (!error.empty()) {
          r.error = error;  // one target failed: the answer is incomplete
          continue;
        }
        if (ips)
          for (auto& ip : *ips) found.insert({ip, p});
      }
    }
  }
  if (found.size() > kMaxDiscoveredAddresses) {
    r.note = "truncated to " + std::to_string(kMaxDiscoveredAddresses) + " of " + std::to_string(found.size()) +
             " addresses";
  }
  for (const auto& a : found) {
    if (r.addresses.size() >= kMaxDiscoveredAddresses) break;
    r.addresses.push_back(a);
  }
  r.took = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
  return r;
}

struct Resolver::Shared {
  std::mutex mu;
  std::condition_variable cv;
  boost::asio::io_context* io = nullptr;  // null once the Resolver is gone
  bool stop = false;
  struct Request {
    DiscoverTarget target;
    uint16_t port = 0;
    std::function<void(Resolution)> done;
  };
  std::optional<Request> waiting;
};

Resolver::Resolver(boost::asio::io_context& io) : shared_(std::make_shared<Shared>()) {
  shared_->io = &io;
  std::thread([s = shared_] {
    for (;;) {
      Shared::Request req;
      {
        std::unique_lock lock(s->mu);
        s->cv.wait(lock, [&] { return s->stop || s->waiting.has_value(); });
        if (s->stop) return;
        req = std::move(*s->waiting);
        s->waiting.reset();
      }
      Resolution r = resolve_now(req.target, req.port);
      std::lock_guard lock(s->mu);
      if (s->io == nullptr) return;
      boost::asio::post(*s->io, [done = std::move(req.done), r = std::move(r)]() mutable { done(std::move(r)); });
    }
  }).detach();
}

Resolver::~Resolver() {
  std::lock_guard lock(shared_->mu);
  shared_->io = nullptr;
  shared_->stop = true;
  shared_->waiting.reset();
  shared_->cv.notify_all();
}

void Resolver::resolve(DiscoverTarget target, uint16_t port, std::function<void(Resolution)> done) {
  std::lock_guard lock(shared_->mu);
  shared_->waiting = Shared::Request{std::move(target), port, std::move(done)};
  shared_->cv.notify_all();
}

}  // namespace rdmad::peer
