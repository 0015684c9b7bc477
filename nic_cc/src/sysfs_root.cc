#include "rdmad/nic_cc/sysfs_root.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <system_error>

namespace rdmad::nic_cc {

namespace fs = std::filesystem;

std::string SysfsError::message() const {
  return fmt::format("{}: {}", path, detail.empty() ? std::strerror(err) : detail);
}

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n\v\f";
  const auto b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(kSpace);
  return s.substr(b, e - b + 1);
}

std::optional<uint64_t> parse_u64(std::string_view s) {
  s = trim(s);
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

SysfsRoot::SysfsRoot(fs::path root) : root_(std::move(root)) {}

fs::path SysfsRoot::map(std::string_view host_path) const {
  std::string_view rel = host_path;
  while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
  return root_ / fs::path(rel);
}

namespace {

// A sysfs attribute must be read and written with plain read()/write() calls: the kernel reports a
// rejected value as the errno of write(), and some attributes fail on read() (EINVAL) after a
// successful open().
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

SysfsResult<std::string> SysfsRoot::read(std::string_view host_path) const {
  const Fd fd(::open(map(host_path).c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return SysfsError{std::string(host_path), errno, {}};
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SysfsError{std::string(host_path), errno, {}};
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

SysfsResult<std::string> SysfsRoot::read_trimmed(std::string_view host_path) const {
  auto r = read(host_path);
  if (!r) return r.error();
  return std::string(trim(*r));
}

SysfsResult<uint64_t> SysfsRoot::read_u64(std::string_view host_path) const {
  auto r = read(host_path);
  if (!r) return r.error();
  const auto v = parse_u64(*r);
  if (!v) return SysfsError{std::string(host_path), EINVAL, fmt::format("not a number: '{}'", trim(*r))};
  return *v;
}

SysfsResult<bool> SysfsRoot::write(std::string_view host_path, std::string_view value) const {
  std::string text(value);
  if (write_filter_) {
    auto filtered = write_filter_(host_path, value);
    if (!filtered) return SysfsError{std::string(host_path), EINVAL, {}};
    text = std::move(*filtered);
  }
  text.push_back('\n');
  // No O_CREAT: an attribute exists or the knob is not there, and a fixture must behave the same.
  // O_TRUNC matters only for fixture files; sysfs and debugfs ignore it.
  const Fd fd(::open(map(host_path).c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
  if (fd.get() < 0) return SysfsError{std::string(host_path), errno, {}};
  // One write() call: sysfs parses the value of a single write.
  const ssize_t n = ::write(fd.get(), text.data(), text.size());
  if (n < 0) return SysfsError{std::string(host_path), errno, {}};
  if (static_cast<size_t>(n) != text.size()) return SysfsError{std::string(host_path), EIO, "short write"};
  return true;
}

bool SysfsRoot::exists(std::string_view host_path) const {
  std::error_code ec;
  return fs::exists(map(host_path), ec);
}

std::vector<std::string> SysfsRoot::list(std::string_view host_path) const {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(map(host_path), ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

SysfsResult<std::string> SysfsRoot::resolve(std::string_view host_path) const {
  std::error_code ec;
  const fs::path real = fs::canonical(map(host_path), ec);
  if (ec) return SysfsError{std::string(host_path), ec.value(), {}};
  const fs::path base = fs::canonical(root_, ec);
  if (ec) return SysfsError{root_.string(), ec.value(), {}};
  const fs::path rel = real.lexically_relative(base);
  if (rel.empty() || *rel.begin() == "..") {
    return SysfsError{std::string(host_path), EXDEV, "link leaves the sysfs root"};
  }
  return "/" + rel.generic_string();
}

}  // namespace rdmad::nic_cc
