#include "rdmad/daemon/clients/tenant.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

namespace rdmad::clients {
namespace {

// 8-4-4-4-12 lower-case hex digits; the systemd driver writes '_' for '-' (a '-' in a slice name
// is its parent separator), so both are taken and the dashed form is returned.
std::optional<std::string> pod_uid_of(std::string_view s) {
  if (s.size() != 36) return std::nullopt;
  std::string out(s);
  for (size_t i = 0; i < out.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash && (out[i] == '-' || out[i] == '_')) {
      out[i] = '-';
      continue;
    }
    const char c = out[i];
    if (dash || !(std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f'))) return std::nullopt;
  }
  return out;
}

// A component naming a pod: "pod<UID>" (cgroupfs) or "kubepods[-<qos>]-pod<UID>.slice" (systemd).
std::optional<std::string> pod_of_component(std::string_view c) {
  if (c.size() > 6 && c.substr(c.size() - 6) == ".slice") {
    const size_t at = c.rfind("-pod");
    if (c.rfind("kubepods", 0) != 0 || at == std::string_view::npos) return std::nullopt;
    return pod_uid_of(c.substr(at + 4, c.size() - 6 - at - 4));
  }
  if (c.rfind("pod", 0) == 0) return pod_uid_of(c.substr(3));
  return std::nullopt;
}

}  // namespace

std::string Tenant::name() const { return is_pod() ? "pod " + pod_uid : "uid " + std::to_string(uid); }

std::optional<std::string> pod_uid_of_cgroup_path(std::string_view path) {
  bool under_kubepods = false;
  while (!path.empty()) {
    const size_t slash = path.find('/');
    const std::string_view c = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view{} : path.substr(slash + 1);
    if (c.rfind("kubepods", 0) == 0) under_kubepods = true;
    if (!under_kubepods) continue;
    if (auto pod = pod_of_component(c)) return pod;
  }
  return std::nullopt;
}

std::optional<std::string> pod_uid_of_cgroup_file(std::string_view text) {
  std::optional<std::string> v1;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    // hierarchy-ID:controller-list:cgroup-path (the path may hold ':' itself)
    const size_t a = line.find(':');
    const size_t b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    auto pod = pod_uid_of_cgroup_path(line.substr(b + 1));
    // The unified hierarchy's line (cgroup v2) names the process's cgroup; in v1's hybrid mode it
    // is often just "0::/", and the controllers' lines say where the container is.
    if (pod && line.substr(0, b + 1) == "0::") return pod;
    if (pod && !v1) v1 = pod;
  }
  return v1;
}

Result<Tenant> tenant_of_process(const std::string& proc_root, pid_t pid, uid_t uid) {
  if (pid <= 0) return Tenant::of_uid(uid);
  const std::string path = proc_root + "/" + std::to_string(pid) + "/cgroup";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    const int err = errno;
    return Error{RDMAD_ERR_PERMISSION, "cannot tell the tenant of pid " + std::to_string(pid) + " (uid " +
                                           std::to_string(uid) + "): open " + path + ": " + std::strerror(err) +
                                           (err == ENOENT ? " (the process exited?)" : "")};
  }
  // A few lines; bounded whatever is there.
  std::string text(8192, '\0');
  size_t got = 0;
  for (ssize_t n; got < text.size() && (n = ::read(fd, text.data() + got, text.size() - got)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return Error{RDMAD_ERR_PERMISSION, "cannot tell the tenant of pid " + std::to_string(pid) + ": read " + path +
                                             ": " + std::strerror(err)};
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  if (auto pod = pod_uid_of_cgroup_file(text)) return Tenant::of_pod(*pod);
  return Tenant::of_uid(uid);
}

}  // namespace rdmad::clients
