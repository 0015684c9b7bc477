#pragma once
// Loading and checking configuration files. Every error names file:line:column, the key path and
// what was expected; all errors of a file are collected, not just the first.
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
  bool ok() const { return errors.empty(); }
};

struct LoadOptions {
  // Open the credential files the config names and check them (credential_file.h). Off only for
  // tests of example files whose paths exist on an operator's host, not here.
  bool check_files = true;
};

// Parses TOML text; `name` is the file name used in errors.
LoadResult load_string(std::string_view text, const std::string& name, LoadOptions options = {});
// Reads and parses a file.
LoadResult load_file(const std::string& path, LoadOptions options = {});
// The embedded default configuration (always valid; a test checks it).
Config default_config();
// Applies environment overrides (RDMAD_LOG_LEVEL). Returns an error text for an invalid value.
std::string apply_environment(Config& config);

// The default configuration file, with every key documented (`rdmad --print-default-config`).
std::string render_default_config();
// The reference documentation in Markdown (docs/configuration.md).
std::string render_markdown();

}  // namespace rdmad::config
