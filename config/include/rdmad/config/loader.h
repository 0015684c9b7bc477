#pragma once
// Loading and checking configuration files. Every error names file:line:column, the key path and
// what was expected; all errors of a file are collected, not just the first.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "rdmad/config/config.h"

namespace rdmad::config {

struct Error {
  std::string file;
  uint32_t line = 0;    // 1-based; 0 when the error has no position (e.g. unreadable file)
  uint32_t column = 0;
  std::string key;      // key path, e.g. "nic[1].backend"; empty for syntax errors
  std::string message;  // what was wrong and what was expected

  // "file:line:column: key: message"
  std::string to_string() const;
};

struct LoadResult {
  Config config;
  std::vector<Error> errors;
  // Valid but risky settings (an insecure peer channel, a wildcard listen address): `--check-config`
  // prints them, the daemon logs them at warning on every start.
  std::vector<Error> warnings;
  // Checks that could not run where the file was loaded (with LoadOptions::credentials_elsewhere:
  // a systemd credential outside its service); `--check-config` names them.
  std::vector<Error> not_checked;
  bool ok() const { return errors.empty(); }
};

struct LoadOptions {
  // Open the credential files the config names and check them (credential_file.h). Off only for
  // tests of example files whose paths exist on an operator's host, not here.
  bool check_files = true;
  // Loaded outside the service (--check-config): a "credential:NAME" setting without
  // $CREDENTIALS_DIRECTORY is a check not run (LoadResult::not_checked), not an error.
  bool credentials_elsewhere = false;
};

// The largest configuration file the daemon reads: 4 MiB (the full reference file is about 40 KiB).
// A bigger one is refused, so that /dev/zero or a runaway generator cannot grow the daemon's memory.
inline constexpr size_t kMaxConfigFileBytes = size_t{4} << 20;

// Reads a configuration file into *text, refusing what is not safe to read: anything but a
// regular file (directories, FIFOs, devices, sockets, and symlinks to them: a symlink to a regular
// file, as Kubernetes mounts a ConfigMap, is fine), a file larger than `max_bytes`, one every user
// may write, and one owned by neither root nor the effective uid. Never blocks on the file: it is
// opened with O_NONBLOCK and checked again with fstat on the descriptor, and at most max_bytes + 1
// bytes are read. Returns false with *error (naming the file, line 0) when refused.
bool read_config_file(const std::string& path, std::string* text, Error* error,
                      size_t max_bytes = kMaxConfigFileBytes);

// Parses TOML text; `name` is the file name used in errors.
LoadResult load_string(std::string_view text, const std::string& name, LoadOptions options = {});
// Reads (read_config_file) and parses a file.
LoadResult load_file(const std::string& path, LoadOptions options = {});
// The embedded default configuration (always valid; a test checks it).
Config default_config();
// Applies environment overrides (RDMAD_LOG_LEVEL) to result.config: an invalid value is an error
// of `result`, and a value that differs from the file's a warning (an override is never silent).
void apply_environment(LoadResult& result);
// Logs every warning of `result` on the config logger, at warning (each start and reload).
void log_warnings(const LoadResult& result);

// The default configuration file, with every key documented (`rdmad --print-default-config`).
std::string render_default_config();
// The reference documentation in Markdown (docs/configuration.md).
std::string render_markdown();

}  // namespace rdmad::config
