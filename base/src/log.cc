#include "rdmad/base/log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "rdmad/base/assert.h"
#include "rdmad/base/log_fields.h"

namespace rdmad::log {
namespace {

constexpr size_t kCount = std::size(kComponents);

constexpr const char* kPriority[] = {"7", "7", "6", "4", "3", "2", "6"};

const char* priority(spdlog::level::level_enum level) {
  const auto i = static_cast<size_t>(level);
  return i < std::size(kPriority) ? kPriority[i] : "6";
}

// "%*" → the syslog priority of the message level, as sd-daemon(3) prefixes expect.
class SyslogPriorityFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    dest.push_back('<');
    dest.push_back(priority(msg.level)[0]);
    dest.push_back('>');
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<SyslogPriorityFlag>(); }
};

std::string& journal_socket_path() {
  static std::string path = "/run/systemd/journal/socket";
  return path;
}

// Under systemd: each line goes to journald natively (sd_journal_print's datagram protocol,
// systemd.journal-fields(7)), with PRIORITY, SYSLOG_IDENTIFIER, RDMAD_COMPONENT and one
// RDMAD_<KEY> field per key=value of the line, so `journalctl RDMAD_NIC=rail0` finds a NIC's lines.
// A datagram the journal does not take (no socket, too large) goes to stderr in the stream format
// instead: nothing is lost.
class JournalSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit JournalSink(std::shared_ptr<spdlog::sinks::sink> fallback) : fallback_(std::move(fallback)) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  }
  ~JournalSink() override {
    if (fd_ >= 0) ::close(fd_);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const std::string_view text(msg.payload.data(), msg.payload.size());
    const std::string_view component(msg.logger_name.data(), msg.logger_name.size());
    std::vector<std::pair<std::string, std::string>> fields = {
        {"MESSAGE", "[" + std::string(component) + "] " + std::string(text)},
        {"PRIORITY", priority(msg.level)},
        {"SYSLOG_IDENTIFIER", "rdmad"},
        {"RDMAD_COMPONENT", std::string(component)}};
    for (auto& f : base::journal_fields(text)) fields.push_back(std::move(f));
    const std::string datagram = journal_datagram(fields);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string& path = journal_socket_path();
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    if (fd_ >= 0 && ::sendto(fd_, datagram.data(), datagram.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr),
                             sizeof(addr)) == static_cast<ssize_t>(datagram.size()))
      return;
    fallback_->log(msg);
  }
  void flush_() override { fallback_->flush(); }

 private:
  std::shared_ptr<spdlog::sinks::sink> fallback_;
  int fd_ = -1;
};

// get() runs per log line on every thread: it reads the table without the mutex (an atomic
// shared_ptr per component); the mutex only orders the writers (setup() against a first use).
struct Loggers {
  std::mutex mu;
  std::array<std::atomic<std::shared_ptr<spdlog::logger>>, kCount> by_component;
  std::atomic<bool> built{false};
};

Loggers& loggers() {
  static Loggers l;
  return l;
}

// Builds every logger; the caller holds loggers().mu.
void build(Loggers& l, spdlog::level::level_enum level, bool journal) {
  auto stream = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(journal ? spdlog::color_mode::never
                                                                             : spdlog::color_mode::automatic);
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  if (journal) {
    formatter->add_flag<SyslogPriorityFlag>('*').set_pattern("%*[%n] %v");
  } else {
    formatter->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%-5l%$ [%n] %v");
  }
  stream->set_formatter(std::move(formatter));
  std::shared_ptr<spdlog::sinks::sink> sink = stream;
  if (journal) sink = std::make_shared<JournalSink>(stream);
  for (size_t i = 0; i < kCount; ++i) {
    const std::string n(kComponents[i]);
    spdlog::drop(n);
    auto logger = std::make_shared<spdlog::logger>(n, sink);
    logger->set_level(level);
    logger->flush_on(spdlog::level::info);
    spdlog::register_logger(logger);
    l.by_component[i].store(std::move(logger));
  }
  spdlog::set_default_logger(l.by_component[0].load());
  l.built.store(true, std::memory_order_release);
}

}  // namespace

std::string journal_datagram(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string out;
  for (const auto& [key, value] : fields) {
    out += key;
    if (value.find('\n') == std::string::npos) {
      out += '=';
      out += value;
    } else {  // the binary form: KEY, newline, the length as 64-bit little-endian, the value
      out += '\n';
      const uint64_t n = value.size();
      for (int b = 0; b < 8; ++b) out += static_cast<char>((n >> (8 * b)) & 0xff);
      out += value;
    }
    out += '\n';
  }
  return out;
}

void set_journal_socket_for_test(const std::string& path) { journal_socket_path() = path; }

std::string_view name(Component component) { return kComponents[static_cast<size_t>(component)]; }

bool stderr_is_journal() {
  // JOURNAL_STREAM is "device:inode" of the journal stream; only trust it if it is our stderr
  // (a child that inherited the variable but not the fd must not use the journal format).
  const char* js = std::getenv("JOURNAL_STREAM");
  if (js == nullptr) return false;
  unsigned long long dev = 0;
  unsigned long long ino = 0;
  if (std::sscanf(js, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st {};
  if (fstat(STDERR_FILENO, &st) != 0) return false;
  return st.st_dev == dev && st.st_ino == ino;
}

void setup(spdlog::level::level_enum level, std::optional<bool> journal) {
  auto& l = loggers();
  std::lock_guard lock(l.mu);
  build(l, level, journal.value_or(stderr_is_journal()));
}

void set_level(spdlog::level::level_enum level) {
  spdlog::apply_all([level](const std::shared_ptr<spdlog::logger>& l) { l->set_level(level); });
}

std::optional<spdlog::level::level_enum> parse_level(std::string_view name) {
  const auto level = spdlog::level::from_str(std::string(name));
  // from_str maps unknown names to "off"; only accept "off" when it was asked for.
  if (level == spdlog::level::off && name != "off") return std::nullopt;
  return level;
}

std::shared_ptr<spdlog::logger> get(Component component) {
  auto& l = loggers();
  if (!l.built.load(std::memory_order_acquire)) {
    std::lock_guard lock(l.mu);
    if (!l.built.load(std::memory_order_relaxed)) build(l, spdlog::level::info, stderr_is_journal());
  }
  return l.by_component[static_cast<size_t>(component)].load();
}

std::shared_ptr<spdlog::logger> replace_for_test(Component component, std::shared_ptr<spdlog::logger> logger) {
  (void)get(component);  // built, so that setup()'s first use cannot overwrite the replacement
  std::lock_guard lock(loggers().mu);
  return loggers().by_component[static_cast<size_t>(component)].exchange(std::move(logger));
}

}  // namespace rdmad::log
