// rdmad-supervise: keeps rdmad's client sessions across its restarts where systemd is not the
// supervisor (a container's entry point, a plain init script). It plays systemd's part of the
// sd_notify(3) protocol for one child: a private $NOTIFY_SOCKET, the file-descriptor store
// (FDSTORE=1 / FDNAME= / FDSTOREREMOVE=1) and, with --watchdog-sec, the watchdog; when the child
// exits unasked (a crash, a watchdog kill) or on SIGUSR1 it starts it again with the stored
// descriptors (LISTEN_FDS, LISTEN_FDNAMES, LISTEN_PID), so rdmad restores its sessions
// (docs/operations.md, "Restarts that keep registrations"). SIGTERM and SIGINT stop the child and
// the supervisor (the store goes with it, as after `systemctl stop`); SIGHUP is passed on.
//
// Only the child may use the socket: it lives in a directory of mode 0700 and every message's
// sender (SCM_CREDENTIALS) must be the child's pid; others are dropped and counted in the log.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char* fmt, ...) {
  std::fprintf(stderr, "rdmad-supervise: ");
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
}

const char* kUsage =
    "Usage: rdmad-supervise [OPTIONS] -- COMMAND [ARGS...]\n"
    "Runs COMMAND (rdmad) as systemd would for Type=notify with a file-descriptor store, and starts it\n"
    "again, with the descriptors it stored, when it exits unasked or on SIGUSR1: rdmad then keeps its\n"
    "clients' registrations and exports across the restart.\n"
    "\n"
    "Options:\n"
    "  --runtime-dir DIR      where the private notify socket goes (default $RUNTIME_DIRECTORY, else /run/rdmad)\n"
    "  --fd-store-max N       descriptors kept at most (default 65536; beyond it FDSTORE is refused)\n"
    "  --restart-delay-ms N   wait before a restart after an unasked exit (default 2000)\n"
    "  --max-restarts N       unasked restarts allowed within 10 minutes, then give up (default 5)\n"
    "  --watchdog-sec N       kill (SIGABRT) and restart the child when it stops sending WATCHDOG=1 for N s\n"
    "                         (passed to it as WATCHDOG_USEC; default 0: off)\n"
    "  -h, --help             this text\n"
    "\n"
    "Signals: SIGUSR1 restarts the child keeping the store; SIGHUP is passed on (reload); SIGTERM and\n"
    "SIGINT stop the child (SIGTERM) and exit with its status, dropping the store.\n"
    "\n"
    "Example (a container's entry point):\n"
    "  rdmad-supervise --watchdog-sec 30 -- /usr/sbin/rdmad --config /etc/rdmad/rdmad.toml\n";

struct Options {
  std::string runtime_dir;
  size_t fd_store_max = 65536;
  int restart_delay_ms = 2000;
  int max_restarts = 5;
  int watchdog_sec = 0;
  std::vector<std::string> command;
};

bool parse(int argc, char** argv, Options& o) {
  const char* env = std::getenv("RUNTIME_DIRECTORY");
  o.runtime_dir = env != nullptr && *env != '\0' ? env : "/run/rdmad";
  int i = 1;
  auto value = [&](const char* name) -> const char* {
    if (i + 1 >= argc) {
      say("%s needs a value", name);
      return nullptr;
    }
    return argv[++i];
  };
  auto number = [&](const char* name, long lo, long hi, long& out) {
    const char* v = value(name);
    if (v == nullptr) return false;
    char* end = nullptr;
    out = std::strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || out < lo || out > hi) {
      say("%s: invalid value \"%s\": expected an integer in [%ld, %ld]", name, v, lo, hi);
      return false;
    }
    return true;
  };
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    long n = 0;
    if (a == "--") {
      for (++i; i < argc; ++i) o.command.emplace_back(argv[i]);
      break;
    }
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "--runtime-dir") {
      const char* v = value("--runtime-dir");
      if (v == nullptr) return false;
      o.runtime_dir = v;
    } else if (a == "--fd-store-max") {
      if (!number("--fd-store-max", 0, 1 << 20, n)) return false;
      o.fd_store_max = static_cast<size_t>(n);
    } else if (a == "--restart-delay-ms") {
      if (!number("--restart-delay-ms", 0, 3600000, n)) return false;
      o.restart_delay_ms = static_cast<int>(n);
    } else if (a == "--max-restarts") {
      if (!number("--max-restarts", 0, 1000, n)) return false;
      o.max_restarts = static_cast<int>(n);
    } else if (a == "--watchdog-sec") {
      if (!number("--watchdog-sec", 0, 3600, n)) return false;
      o.watchdog_sec = static_cast<int>(n);
    } else {
      say("unknown option %s (see --help)", a.c_str());
      return false;
    }
  }
  if (o.command.empty()) {
    say("no command to run (see --help): rdmad-supervise [OPTIONS] -- COMMAND [ARGS...]");
    return false;
  }
  return true;
}

// The value of `key=` in a newline-separated notification, or "".
std::string field(const std::string& msg, const std::string& key) {
  size_t at = 0;
  while (at <= msg.size()) {
    size_t end = msg.find('\n', at);
    if (end == std::string::npos) end = msg.size();
    if (msg.compare(at, key.size() + 1, key + "=") == 0) return msg.substr(at + key.size() + 1, end - at - key.size() - 1);
    at = end + 1;
  }
  return "";
}

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 255) return false;
  for (unsigned char c : name)
    if (c < 0x21 || c > 0x7e || c == ':') return false;
  return true;
}

bool same_file(int a, int b) {
  struct stat sa {}, sb {};
  return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

class Supervisor {
 public:
  explicit Supervisor(Options o) : o_(std::move(o)) {}

  int run() {
    if (!open_socket()) return 1;
    sigset_t mask;
    sigemptyset(&mask);
    for (int s : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGCHLD}) sigaddset(&mask, s);
    sigprocmask(SIG_BLOCK, &mask, &saved_mask_);
    sigfd_ = signalfd(-1, &mask, SFD_CLOEXEC);
    if (!spawn()) return 1;
    for (;;) {
      int timeout = -1;
      if (o_.watchdog_sec > 0 && child_ > 0) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                              last_ping_ + std::chrono::seconds(o_.watchdog_sec) - Clock::now())
                              .count();
        timeout = static_cast<int>(std::max<long>(left, 0));
      }
      if (child_ <= 0 && restart_at_) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(*restart_at_ - Clock::now()).count();
        timeout = static_cast<int>(std::max<long>(left, 0));
      }
      pollfd p[2] = {{sock_, POLLIN, 0}, {sigfd_, POLLIN, 0}};
      if (::poll(p, 2, timeout) < 0 && errno != EINTR) return fail("poll");
      if (p[0].revents & POLLIN) receive();
      if (p[1].revents & POLLIN) {
        signalfd_siginfo si{};
        if (::read(sigfd_, &si, sizeof si) == sizeof si) {
          if (const int rc = on_signal(static_cast<int>(si.ssi_signo)); rc >= 0) return rc;
        }
      }
      if (child_ > 0 && o_.watchdog_sec > 0 && Clock::now() >= last_ping_ + std::chrono::seconds(o_.watchdog_sec)) {
        say("watchdog timeout: no WATCHDOG=1 from pid %d for %d s, killing it (SIGABRT)", child_, o_.watchdog_sec);
        ::kill(child_, SIGABRT);
        last_ping_ = Clock::now() + std::chrono::hours(24);  // once
      }
      if (child_ <= 0 && restart_at_ && Clock::now() >= *restart_at_) {
        restart_at_.reset();
        if (!spawn()) return 1;
      }
    }
  }

 private:
  int fail(const char* what) {
    say("%s: %s", what, std::strerror(errno));
    return 1;
  }
  bool failed(const std::string& what) {
    say("%s: %s", what.c_str(), std::strerror(errno));
    return false;
  }

  bool open_socket() {
    const std::string dir = o_.runtime_dir + "/supervise";
    ::mkdir(o_.runtime_dir.c_str(), 0755);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return failed("mkdir " + dir);
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
        (st.st_mode & 077) != 0) {
      say("%s must be a directory of ours with mode 0700", dir.c_str());
      return false;
    }
    path_ = dir + "/notify.sock";
    sockaddr_un addr{};
    if (path_.size() >= sizeof(addr.sun_path)) {
      say("socket path too long: %s", path_.c_str());
      return false;
    }
    ::unlink(path_.c_str());
    sock_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path_.c_str(), path_.size());
    if (sock_ < 0 || ::bind(sock_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return failed("bind " + path_);
    const int one = 1;
    ::setsockopt(sock_, SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
    int big = 8 << 20;
    ::setsockopt(sock_, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
    return true;
  }

  bool spawn() {
    std::vector<int> fds;
    std::string names;
    for (const auto& [name, fd] : store_) {
      fds.push_back(fd);
      names += (names.empty() ? "" : ":") + name;
    }
    std::vector<std::string> env = {"NOTIFY_SOCKET=" + path_};
    if (o_.watchdog_sec > 0) env.push_back("WATCHDOG_USEC=" + std::to_string(o_.watchdog_sec * 1000000LL));
    if (!fds.empty()) {
      env.push_back("LISTEN_FDS=" + std::to_string(fds.size()));
      env.push_back("LISTEN_FDNAMES=" + names);
    }
    std::vector<char*> args;
    for (auto& a : o_.command) args.push_back(a.data());
    args.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) return failed("fork");
    if (pid == 0) {
      sigprocmask(SIG_SETMASK, &saved_mask_, nullptr);
      // A supervisor that is killed takes its child with it (its store is gone anyway).
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      const int n = static_cast<int>(fds.size());
      for (int& fd : fds) fd = ::fcntl(fd, F_DUPFD, 3 + n);  // out of the way of 3.. first
      for (int i = 0; i < n; ++i) ::dup2(fds[static_cast<size_t>(i)], 3 + i);
      for (auto& e : env) ::putenv(e.data());
      if (n > 0) {
        static char pid_env[32];
        std::snprintf(pid_env, sizeof pid_env, "LISTEN_PID=%d", static_cast<int>(::getpid()));
        ::putenv(pid_env);
      }
      ::execvp(args[0], args.data());
      std::fprintf(stderr, "rdmad-supervise: exec %s: %s\n", args[0], std::strerror(errno));
      ::_exit(127);
    }
    child_ = pid;
    last_ping_ = Clock::now();
    say("started pid=%d stored_fds=%zu", pid, fds.size());
    return true;
  }

  void receive() {
    for (;;) {
      char buf[4096];
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(sizeof(int) * 253)];
      iovec iov{buf, sizeof buf - 1};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      const ssize_t n = ::recvmsg(sock_, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
      if (n < 0) return;
      std::vector<int> fds;
      pid_t sender = -1;
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET) continue;
        if (c->cmsg_type == SCM_CREDENTIALS) {
          ucred cred{};
          std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
          sender = cred.pid;
        } else if (c->cmsg_type == SCM_RIGHTS) {
          const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
          for (size_t i = 0; i < count; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            fds.push_back(fd);
          }
        }
      }
      const std::string text(buf, static_cast<size_t>(n));
      if (sender != child_ || child_ <= 0) {
        for (int fd : fds) ::close(fd);
        if (++refused_ == 1 || refused_ % 1000 == 0)
          say("notification from pid %d refused (not the child) refused=%zu", static_cast<int>(sender), refused_);
        continue;
      }
      handle(text, fds);
    }
  }

  void handle(const std::string& text, std::vector<int>& fds) {
    if (field(text, "READY") == "1") say("ready pid=%d status=\"%s\"", child_, field(text, "STATUS").c_str());
    if (field(text, "WATCHDOG") == "1") last_ping_ = Clock::now();
    const std::string name = field(text, "FDNAME").empty() ? "stored" : field(text, "FDNAME");
    if (field(text, "FDSTOREREMOVE") == "1") {
      auto [lo, hi] = store_.equal_range(name);
      for (auto it = lo; it != hi; ++it) ::close(it->second);
      store_.erase(lo, hi);
    }
    if (field(text, "FDSTORE") != "1" || !valid_name(name)) {
      for (int fd : fds) ::close(fd);
      return;
    }
    for (int fd : fds) {
      bool known = false;
      for (const auto& [n2, f2] : store_) known = known || same_file(fd, f2);
      if (known || store_.size() >= o_.fd_store_max) {
        if (!known && ++over_ == 1) say("fd store full (%zu): FDSTORE refused", o_.fd_store_max);
        ::close(fd);
        continue;
      }
      store_.emplace(name, fd);
    }
  }

  // The exit code to leave with, or -1 to go on.
  int on_signal(int sig) {
    switch (sig) {
      case SIGTERM:
      case SIGINT:
        stopping_ = true;
        if (child_ <= 0) return 0;
        ::kill(child_, SIGTERM);
        return -1;
      case SIGHUP:
        if (child_ > 0) ::kill(child_, SIGHUP);
        return -1;
      case SIGUSR1:
        if (child_ > 0) {
          say("restart asked pid=%d stored_fds=%zu", child_, store_.size());
          restart_asked_ = true;
          ::kill(child_, SIGTERM);
        }
        return -1;
      case SIGCHLD:
        return reap();
      default:
        return -1;
    }
  }

  int reap() {
    int status = 0;
    for (;;) {
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return -1;
      if (pid != child_) continue;
      child_ = -1;
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (stopping_) {
        say("stopped code=%d", code);
        return code;
      }
      if (restart_asked_) {
        restart_asked_ = false;
        say("exited code=%d, restarting now", code);
        restart_at_ = Clock::now();
        return -1;
      }
      const auto now = Clock::now();
      std::erase_if(recent_, [&](Clock::time_point t) { return now - t > std::chrono::minutes(10); });
      recent_.push_back(now);
      if (static_cast<int>(recent_.size()) > o_.max_restarts) {
        say("exited code=%d: %zu unasked exits within 10 minutes, giving up", code, recent_.size());
        return code == 0 ? 1 : code;
      }
      say("exited code=%d unasked, restarting in %d ms", code, o_.restart_delay_ms);
      restart_at_ = now + std::chrono::milliseconds(o_.restart_delay_ms);
      return -1;
    }
  }

  Options o_;
  std::string path_;
  int sock_ = -1;
  int sigfd_ = -1;
  sigset_t saved_mask_{};
  pid_t child_ = -1;
  bool stopping_ = false;
  bool restart_asked_ = false;
  std::optional<Clock::time_point> restart_at_;
  Clock::time_point last_ping_;
  std::multimap<std::string, int> store_;
  std::vector<Clock::time_point> recent_;
  size_t refused_ = 0;
  size_t over_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) return 2;
  return Supervisor(std::move(o)).run();
}
