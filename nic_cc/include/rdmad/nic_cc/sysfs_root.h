#pragma once
// One configurable root for every sysfs/debugfs path the daemon reads or writes. On a real host the
// root is "/"; tests point it at a fixture tree that has the same shape (symlinks included), so
// "/sys/class/infiniband/mlx5_0" maps to "<root>/sys/class/infiniband/mlx5_0".
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rdmad/base/result.h"

namespace rdmad::nic_cc {

// The failure of one file operation: which path (as the host sees it), errno and its text.
struct SysfsError {
  std::string path;  // host path, e.g. "/sys/class/net/eth0/ecn/roce_rp/rpg_ai_rate"
  int err = 0;       // errno (EINVAL for a malformed value)
  std::string detail;
  // "read /sys/...: No such file or directory".
  std::string message() const;
};

template <class T>
using SysfsResult = base::Result<T, SysfsError>;

class SysfsRoot {
 public:
  // `root` stands in for "/". The default is the real host.
  explicit SysfsRoot(std::filesystem::path root = "/");

  const std::filesystem::path& root() const { return root_; }
  bool is_host() const { return root_ == "/"; }

  // Maps a host path ("/sys/...") onto the root.
  std::filesystem::path map(std::string_view host_path) const;

  // Whole file, as read (a sysfs attribute is one small file).
  SysfsResult<std::string> read(std::string_view host_path) const;
  // File content with surrounding whitespace and newlines removed.
  SysfsResult<std::string> read_trimmed(std::string_view host_path) const;
  // An unsigned decimal (or 0x-prefixed hex) value; 64-bit.
  SysfsResult<uint64_t> read_u64(std::string_view host_path) const;
  // Writes `value` followed by a newline, as `echo value > path` does.
  SysfsResult<bool> write(std::string_view host_path, std::string_view value) const;

  bool exists(std::string_view host_path) const;
  // Names of the entries of a directory, sorted; empty when it does not exist.
  std::vector<std::string> list(std::string_view host_path) const;
  // Resolves symlinks inside the root and returns the host path ("/sys/devices/pci..."); error if the
  // path does not exist or leaves the root.
  SysfsResult<std::string> resolve(std::string_view host_path) const;

  // Test hook: every write passes through `filter(host_path, value)`; the returned text is what
  // lands in the file (a device that quantizes or clamps), nullopt makes the write fail with EINVAL
  // (a device that rejects the value).
  using WriteFilter = std::function<std::optional<std::string>(std::string_view, std::string_view)>;
  void set_write_filter_for_test(WriteFilter filter) { write_filter_ = std::move(filter); }

 private:
  std::filesystem::path root_;
  WriteFilter write_filter_;
};

// Trims ASCII whitespace on both sides.
std::string_view trim(std::string_view s);
// Parses an unsigned integer ("123", "0x1f"); nullopt on anything else.
std::optional<uint64_t> parse_u64(std::string_view s);

}  // namespace rdmad::nic_cc
