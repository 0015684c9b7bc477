// The two listening sockets: the client socket and the admin socket. Each is adopted from systemd
// (matched by path: rdmad.socket and rdmad-admin.socket) or bound here, with its mode and group.
#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <optional>

#include "connection.h"
#include "log.h"
#include "rdmad/base/log_fields.h"

namespace rdmad::clients {
namespace {

// A live socket at path means another program serves it; only a socket nobody listens on
// (ECONNREFUSED: left over from a crash) is removed. A live socket of another type (a stream socket
// from a unit that says ListenStream=) is reported, never deleted.
Result<Ok> clear_stale_socket(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return Ok{};
  if (!S_ISSOCK(st.st_mode)) return Error{RDMAD_ERR_SYSTEM, path + " exists and is not a socket"};
  int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (probe < 0) return sys_error("socket", errno);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  const int rc = connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  const int err = rc == 0 ? 0 : errno;
  ::close(probe);
  if (rc == 0) return Error{RDMAD_ERR_SYSTEM, "another daemon is serving " + path};
  if (err == EPROTOTYPE)
    return Error{RDMAD_ERR_SYSTEM, "a socket of another type (not SOCK_SEQPACKET) is live at " + path +
                                       " and is left in place; if systemd made it, rdmad.socket must say "
                                       "ListenSequentialPacket=, not ListenStream="};
  if (err != ECONNREFUSED) return sys_error("probe of the socket at " + path, err);
  if (unlink(path.c_str()) != 0) return sys_error("unlink stale " + path, errno);
  return Ok{};
}

// What a descriptor systemd passed is, for the warning when it is not ours to serve.
std::string describe_passed_socket(int fd) {
  if (sd_is_socket_unix(fd, SOCK_STREAM, -1, nullptr, 0) > 0)
    return "a stream socket (ListenStream=; rdmad needs ListenSequentialPacket=)";
  if (sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, nullptr, 0) > 0) return "a listening socket for another path";
  if (sd_is_socket(fd, AF_UNSPEC, 0, -1) > 0) return "not a listening SOCK_SEQPACKET Unix socket";
  return "not a socket";
}

// [ipc] socket_group: a group name, or a number.
std::optional<gid_t> resolve_group(const std::string& name) {
  if (group* g = getgrnam(name.c_str())) return g->gr_gid;
  unsigned long v = 0;
  auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), v);
  if (ec == std::errc{} && end == name.data() + name.size() && v < 0xffffffffUL) return static_cast<gid_t>(v);
  return std::nullopt;
}

bool member_of(gid_t gid) {
  if (getegid() == gid) return true;
  std::vector<gid_t> groups(static_cast<size_t>(std::max(0, getgroups(0, nullptr))));
  const int n = getgroups(static_cast<int>(groups.size()), groups.data());
  return std::find(groups.begin(), groups.begin() + std::max(0, n), gid) != groups.begin() + std::max(0, n);
}

// Gives the socket at path group `gid`. Nothing to do when it was made with it (its directory is
// set-group-id to the group: tmpfiles' "d /run/rdmad 2750 rdmad <group>"); chown to a group the
// daemon is a member of needs no CAP_CHOWN; anything else does, and the error says what to change.
Result<Ok> give_group(const std::string& path, const std::string& name, gid_t gid) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return sys_error("stat " + path, errno);
  if (st.st_gid == gid) return Ok{};
  if (chown(path.c_str(), static_cast<uid_t>(-1), gid) == 0) return Ok{};
  const int err = errno;
  if (err != EPERM) return sys_error("chown " + path, err);
  return Error{RDMAD_ERR_PERMISSION,
               "[ipc] socket_group = \"" + name + "\": cannot give " + path + " group " + std::to_string(gid) +
                   ": the daemon (uid " + std::to_string(geteuid()) + ") is " +
                   (member_of(gid) ? "a member of it but chown was refused (a syscall filter?)"
                                   : "not a member of it and has no CAP_CHOWN") +
                   "; add the daemon's user to the group, make the socket's directory set-group-id to it "
                   "(chmod g+s, chgrp), or let systemd make the socket (rdmad.socket's SocketGroup=)"};
}

}  // namespace

void UnixServer::Core::adopt_systemd_sockets() {
  char** names = nullptr;
  int n = sd_listen_fds_with_names(0, &names);
  std::vector<std::string> fd_names;
  for (int i = 0; i < n; ++i) {
    fd_names.emplace_back(names != nullptr && names[i] != nullptr ? names[i] : "");
    if (names != nullptr) free(names[i]);
  }
  free(names);
  for (int fd = SD_LISTEN_FDS_START; n > 0 && fd < SD_LISTEN_FDS_START + n; ++fd) {
    // The file-descriptor store's registered memory (session_store.h), not a socket.
    if (fd_names[static_cast<size_t>(fd - SD_LISTEN_FDS_START)].rfind(kStoredMemoryPrefix, 0) == 0) continue;
    bool taken = false;
    for (Listener* l : {&clients_, &admins_}) {
      if (taken || l->activated || l->path.empty() ||
          sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, l->path.c_str(), 0) <= 0)
        continue;
      boost::system::error_code ec;
      l->acceptor.assign(SeqPacket(), fd, ec);
      if (ec) continue;
      if (l->admin) ipc_log()->info("serving admin requests socket={} activation=systemd", base::q(l->path));
      else ipc_log()->info("serving clients socket={} activation=systemd", base::q(l->path));
      l->activated = taken = true;
    }
    if (!taken)
      ipc_log()->warn("passed socket ignored fd={} socket={} reason={}", fd, base::q(clients_.path),
                      base::q(describe_passed_socket(fd)));
  }
}

Result<Ok> UnixServer::Core::bind_socket(Listener& l, uint32_t mode, const std::string& group_name) {
  const std::string& path = l.path;
  if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path))
    return Error{RDMAD_ERR_INVALID_ARGUMENT, "socket path empty or longer than 107 bytes: " + path};
  std::optional<gid_t> gid;
  if (!group_name.empty() && !(gid = resolve_group(group_name)))
    return Error{RDMAD_ERR_INVALID_ARGUMENT, "[ipc] socket_group: unknown group " + group_name};
  std::error_code fec;
  auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty() && !std::filesystem::exists(dir, fec)) {
    std::filesystem::create_directories(dir, fec);
    // The admin socket's directory is the daemon's own: nobody else needs to look inside.
    if (!fec && l.admin) std::filesystem::permissions(dir, std::filesystem::perms::owner_all, fec);
  }
  if (fec) return Error{RDMAD_ERR_SYSTEM, "create " + dir.string() + ": " + fec.message()};
  auto cleared = clear_stale_socket(path);
  if (!cleared.ok()) return cleared;
  boost::system::error_code ec;
  l.acceptor.open(SeqPacket(), ec);
  // Not listening until its mode and group are set: nobody connects before (the admin socket's
  // accept checks SO_PEERCRED as well).
  if (!ec) l.acceptor.bind(SeqPacket::endpoint(path), ec);
  if (ec) return Error{RDMAD_ERR_SYSTEM, "bind " + path + ": " + ec.message()};
  l.created_path = true;
  if (gid) {
    auto given = give_group(path, group_name, *gid);
    if (!given.ok()) return given;
  }
  if (chmod(path.c_str(), mode) != 0) return sys_error("chmod " + path, errno);
  l.acceptor.listen(SOMAXCONN, ec);
  if (ec) return Error{RDMAD_ERR_SYSTEM, "listen " + path + ": " + ec.message()};
  if (l.admin) ipc_log()->info("serving admin requests socket={} mode=0{:o}", base::q(path), mode);
  else ipc_log()->info("serving clients socket={} mode=0{:o}", base::q(path), mode);
  return Ok{};
}

Result<Ok> UnixServer::Core::listen_on(Listener& l, uint32_t mode, const std::string& group) {
  if (l.path.empty() || l.activated) return Ok{};
  auto bound = bind_socket(l, mode, group);
  if (bound.ok()) return bound;
  if (l.admin) ipc_log()->error("cannot bind admin socket={} error={}", base::q(l.path), base::q(bound.error().message));
  else ipc_log()->error("cannot bind client socket={} error={}", base::q(l.path), base::q(bound.error().message));
  return bound;
}

}  // namespace rdmad::clients
