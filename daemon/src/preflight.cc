#include "rdmad/daemon/preflight.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "preflight_identity.h"
#include "rdmad/config/loader.h"
#include "rdmad/daemon/daemon.h"
#include "rdmad/daemon/nics/embedded_nics.h"

namespace rdmad::daemon {
namespace {

constexpr const char* kServiceUser = "rdmad";  // User= of deploy/systemd/rdmad.service

// Binds a socket of `type` to host:port: empty when the address is one of this host's (and the port
// free), else why not. Port 0 leaves the port to the kernel: a daemon already running holds the
// configured one.
std::string bind_problem(const std::string& host, int type, uint16_t port = 0) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    len = sizeof(*v4);
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    len = sizeof(*v6);
  } else {
    return "not an IP address";
  }
  v4->sin_port = htons(port);  // sin_port and sin6_port are at the same offset
  const int s = ::socket(ss.ss_family, type | SOCK_CLOEXEC, 0);
  if (s < 0) return fmt::format("socket: {}", std::strerror(errno));
  const int one = 1;
  if (type == SOCK_STREAM) ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // as listeners do
  const int rc = ::bind(s, reinterpret_cast<sockaddr*>(&ss), len);
  const int err = errno;
  ::close(s);
  if (rc == 0) return {};
  return err == EADDRNOTAVAIL ? "not an address of this host" : std::strerror(err);
}

struct NicCount {
  size_t in_service = 0;  // would be open at start
  size_t retried = 0;     // would be kept out of service and retried (a device not there yet)
};

// The NICs start-up would open: how many would be in service, and what is wrong with the others.
NicCount check_nics(const config::Config& c, const verbs::BackendRegistry& backends, PreflightReport& out) {
  if (c.nics.empty()) {
    // No [[nic]]: the embedded default, as start-up computes it.
    auto embedded = embedded_nics(backends, c);
    if (!embedded.ok()) {
      out.errors.push_back(fmt::format("nics: no [[nic]], and the embedded default cannot run: {}",
                                       embedded.status().message()));
      return {};
    }
    out.notes.push_back(fmt::format("nics: no [[nic]]: the daemon would run the embedded default ({})",
                                    embedded.value().why));
    return {embedded.value().nics.size(), 0};
  }
  NicCount count;
  for (size_t i = 0; i < c.nics.size(); ++i) {
    const config::NicSection& n = c.nics[i];
    const std::string who = fmt::format("nic[{}] {}", i, n.name);
    const verbs::BackendInfo* b = backends.find(n.backend);
    if (b == nullptr) continue;  // the loader already refused an unknown backend
    if (b->caps.needs_address) {
      // The NIC binds to its address at start; one that is not local stops the daemon.
      if (std::string why = bind_problem(n.address, SOCK_DGRAM); !why.empty()) {
        out.errors.push_back(fmt::format("{}: address {}: {} (a {} NIC binds to it: start-up would fail)", who,
                                         n.address, why, n.backend));
        continue;
      }
    }
    if (b->caps.sysfs_ports && b->discover) {
      verbs::HostScan scan;
      scan.sysfs_root = c.daemon.sysfs_root;
      scan.devices = {n.device};
      auto found = b->discover(scan);
      if (!found.ok()) {
        scan.sysfs_only = true;
        found = b->discover(scan);
      }
      const auto& host = found.ok() ? found.value() : verbs::HostNics{};
      if (std::find(host.devices.begin(), host.devices.end(), n.device) == host.devices.end()) {
        out.warnings.push_back(fmt::format(
            "{}: device {} not found (libibverbs, {}/sys/class/infiniband): the daemon would keep the NIC out of "
            "service and retry it",
            who, n.device, c.daemon.sysfs_root == "/" ? "" : c.daemon.sysfs_root));
        ++count.retried;
        continue;
      }
      const bool has_port = std::any_of(host.ports.begin(), host.ports.end(), [&](const verbs::HostNic& p) {
        return p.device == n.device && p.port == static_cast<unsigned>(n.port);
      });
      if (!has_port) {
        out.warnings.push_back(fmt::format("{}: device {} has no port {}", who, n.device, n.port));
        ++count.retried;
        continue;
      }
    }
    ++count.in_service;
  }
  return count;
}

void check_peer(const config::Config& c, NicCount nics, PreflightReport& out) {
  if (!c.peer.enabled) return;
  if (std::string problem = peer_start_problem(c); !problem.empty()) out.errors.push_back("peer: " + problem);
  if (!c.peer.listen_host.empty()) {
    if (std::string why = bind_problem(c.peer.listen_host, SOCK_STREAM); !why.empty())
      out.errors.push_back(
          fmt::format("peer.listen: {}: {} (the peer channel listens there: start-up would fail)", c.peer.listen_host, why));
  }
  if (nics.in_service > 0) return;
  // Without a rail the channel comes up but no flow can move a byte: an error where no NIC can
  // ever serve, a warning where the daemon retries one (a driver that loads later).
  const std::string what =
      "peer: the peer channel is on but no NIC would be in service at start: flows would have no rail";
  if (nics.retried == 0)
    out.errors.push_back(what + " (fix the [[nic]] findings, or set [peer] enabled = false)");
  else
    out.warnings.push_back(what + " until the daemon opens one of the NICs it retries");
}

// "host:port" or "[v6]:port" (the loader validated it) -> host and port.
bool split_listen(const std::string& s, std::string& host, uint16_t& port) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  host = s.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const long p = std::strtol(s.c_str() + colon + 1, nullptr, 10);
  if (p < 0 || p > 65535) return false;
  port = static_cast<uint16_t>(p);
  return true;
}

// What start-up makes or takes beyond NICs and peers: its directories, the sysfs root it reads and
// the metrics port. A port already taken is a warning: the running daemon holds it until it is
// restarted (a reload keeps it), but a second daemon could not start.
void check_host(const config::Config& c, PreflightReport& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto directory_problem = [&](const std::string& key, const fs::path& dir) {
    if (fs::exists(dir, ec)) {
      if (!fs::is_directory(dir, ec))
        out.errors.push_back(fmt::format("{}: {} exists and is not a directory (start-up would fail)", key, dir.string()));
      return;
    }
    // Start-up creates it (and systemd's RuntimeDirectory= usually has): its nearest existing
    // ancestor must be a directory.
    fs::path p = dir.parent_path();
    while (!p.empty() && p != p.root_path() && !fs::exists(p, ec)) p = p.parent_path();
    if (!p.empty() && fs::exists(p, ec) && !fs::is_directory(p, ec))
      out.errors.push_back(fmt::format("{}: {} cannot be created: {} is not a directory", key, dir.string(), p.string()));
  };
  directory_problem("daemon.runtime_dir", c.daemon.runtime_dir);
  if (const fs::path dir = fs::path(c.daemon.socket_path).parent_path(); !dir.empty())
    directory_problem("daemon.socket_path", dir);  // the client service creates it
  if (!c.daemon.sysfs_root.empty() && c.daemon.sysfs_root != "/") {
    const fs::path sys = fs::path(c.daemon.sysfs_root) / "sys";
    if (!fs::is_directory(c.daemon.sysfs_root, ec))
      out.errors.push_back(fmt::format("daemon.sysfs_root: {}: no such directory (no NIC, counter or DCQCN knob would be "
                                       "found there)",
                                       c.daemon.sysfs_root));
    else if (!fs::is_directory(sys, ec))
      out.warnings.push_back(fmt::format("daemon.sysfs_root: {} has no sys/ (is it the host's root, mounted?): no NIC, "
                                         "counter or DCQCN knob would be found there",
                                         c.daemon.sysfs_root));
  }
  std::string host;
  uint16_t port = 0;
  if (!c.metrics.listen.empty() && split_listen(c.metrics.listen, host, port)) {
    if (std::string why = bind_problem(host, SOCK_STREAM); !why.empty())
      out.errors.push_back(fmt::format("metrics.listen: {}: {} (start-up would fail)", host, why));
    else if (port != 0 && !(why = bind_problem(host, SOCK_STREAM, port)).empty())
      out.warnings.push_back(fmt::format("metrics.listen: {}: {} (a running rdmad holds it until it restarts; another "
                                         "process there would stop start-up)",
                                         c.metrics.listen, why));
  }
  if (c.peer.enabled && !c.peer.listen_host.empty() && c.peer.listen_port != 0) {
    if (std::string why = bind_problem(c.peer.listen_host, SOCK_STREAM, static_cast<uint16_t>(c.peer.listen_port));
        !why.empty() && bind_problem(c.peer.listen_host, SOCK_STREAM).empty())
      out.warnings.push_back(fmt::format("peer.listen: port {}: {} (a running rdmad holds it until it restarts; another "
                                         "process there would stop start-up)",
                                         c.peer.listen_port, why));
  }
}

}  // namespace

PreflightReport preflight(const std::string& path, const PreflightOptions& options,
                          const verbs::BackendRegistry& backends) {
  PreflightReport out;
  config::LoadOptions load;
  load.credentials_elsewhere = true;
  const bool root = ::geteuid() == 0;
  std::string user = options.user;
  const passwd* pw = nullptr;
  if (user.empty()) {
    pw = ::getpwnam(kServiceUser);
    if (pw != nullptr) user = kServiceUser;
  } else {
    pw = ::getpwnam(user.c_str());
    if (pw == nullptr) out.errors.push_back(fmt::format("--user {}: no such user", user));
  }
  // The file and its credentials, as the service's user reads them.
  config::LoadResult mine = config::load_file(path, load);
  if (mine.ok()) config::apply_environment(mine);
  FileFindings files;
  if (pw != nullptr && pw->pw_uid != ::geteuid()) {
    if (root) {
      out.identity = fmt::format("user {} (uid {}, gid {})", user, pw->pw_uid, pw->pw_gid);
      files = load_as_user(path, load, user, pw->pw_uid, pw->pw_gid);
      if (!files.failure.empty()) {
        out.errors.push_back(files.failure);
        files = findings_of(mine);
      }
    } else {
      out.not_checked.push_back(fmt::format(
          "files as user {}: only root can take another user's identity (run sudo rdmad --check-config {})", user,
          path));
      files = findings_of(mine);
    }
  } else {
    out.identity = fmt::format("uid {}{}", ::geteuid(), root ? " (root)" : "");
    if (root && pw == nullptr && options.user.empty())
      out.notes.push_back(fmt::format(
          "files checked as root: there is no user {} here (--user NAME checks them as the unit's User=)",
          kServiceUser));
    files = findings_of(mine);
  }
  out.errors.insert(out.errors.end(), files.errors.begin(), files.errors.end());
  out.warnings.insert(out.warnings.end(), files.warnings.begin(), files.warnings.end());
  out.not_checked.insert(out.not_checked.end(), files.not_checked.begin(), files.not_checked.end());
  // What start-up checks beyond the file, on the configuration as this process reads it (the
  // credentials aside, the same for every user).
  if (!mine.ok()) return out;
  check_host(mine.config, out);
  check_peer(mine.config, check_nics(mine.config, backends, out), out);
  return out;
}

}  // namespace rdmad::daemon
