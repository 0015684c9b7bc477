#include "preflight_identity.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace rdmad::daemon {
namespace {

// One finding per line, its kind first: E(rror), W(arning), N(ot checked), F(ailure).
void put(std::string& out, char kind, std::string text) {
  for (char& c : text)
    if (c == '\n') c = ' ';
  out += kind;
  out += text;
  out += '\n';
}

void write_all(int fd, const std::string& s) {
  for (size_t done = 0; done < s.size();) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

FileFindings findings_of(const config::LoadResult& r) {
  FileFindings f;
  for (const auto& e : r.errors) f.errors.push_back(e.to_string());
  for (const auto& w : r.warnings) f.warnings.push_back(w.to_string());
  for (const auto& n : r.not_checked) f.not_checked.push_back(n.to_string());
  return f;
}

FileFindings load_as_user(const std::string& path, const config::LoadOptions& options, const std::string& user,
                          uid_t uid, gid_t gid) {
  FileFindings f;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    f.failure = fmt::format("pipe: {}", std::strerror(errno));
    return f;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    f.failure = fmt::format("fork: {}", std::strerror(errno));
    ::close(fds[0]);
    ::close(fds[1]);
    return f;
  }
  if (pid == 0) {
    ::close(fds[0]);
    std::string out;
    // Groups first: after setresuid the child may no longer change them.
    if (::initgroups(user.c_str(), gid) != 0 || ::setresgid(gid, gid, gid) != 0 || ::setresuid(uid, uid, uid) != 0) {
      put(out, 'F', fmt::format("cannot become user {} (uid {}, gid {}): {}", user, uid, gid, std::strerror(errno)));
      write_all(fds[1], out);
      ::_exit(2);
    }
    config::LoadResult r = config::load_file(path, options);
    if (r.ok()) config::apply_environment(r);
    const FileFindings mine = findings_of(r);
    for (const auto& e : mine.errors) put(out, 'E', e);
    for (const auto& w : mine.warnings) put(out, 'W', w);
    for (const auto& n : mine.not_checked) put(out, 'N', n);
    write_all(fds[1], out);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    const std::string body = line.substr(1);
    switch (line[0]) {
      case 'E': f.errors.push_back(body); break;
      case 'W': f.warnings.push_back(body); break;
      case 'N': f.not_checked.push_back(body); break;
      default: f.failure = body; break;
    }
  }
  if (f.failure.empty() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
    f.failure = fmt::format("the check as user {} did not finish (wait status {})", user, status);
  return f;
}

}  // namespace rdmad::daemon
