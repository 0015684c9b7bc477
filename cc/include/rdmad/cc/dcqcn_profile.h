#pragma once
// A DCQCN profile file: a named base profile plus mlx5 knobs in the vendor's names and units, as
// `rdmad-sim tune` writes it, `[cc] profile_file` loads it and `rdmactl cc set --profile` pushes it.
//
//   [profile]
//   name = "websearch-50"     # optional label
//   base = "mlx5"             # the named profile the knobs amend (cc::profile_by_name); default mlx5
//   [knobs]                   # any knob of cc::mlx5_knobs(), vendor or debugfs name, in its units
//   rpg_time_reset = 55
//   [tuning]                  # where it came from (scenario, seed, objective, ...): read by people
//   seed = 7
//
// Text in, text out: the callers read and write the files (the daemon with its careful reader).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rdmad/cc/dcqcn_params.h"

namespace rdmad::cc {

struct ProfileKnob {
  const Mlx5Knob* knob = nullptr;
  int64_t value = 0;  // in the knob's units, inside [knob->min, knob->max]
};

struct DcqcnProfile {
  std::string name;
  std::string base = "mlx5";
  std::vector<ProfileKnob> knobs;  // in cc::mlx5_knobs() order, each knob at most once
  // [tuning]: key and the value as TOML text (`7`, `"leafspine"`, `[1, 2]`), in file order.
  std::vector<std::pair<std::string, std::string>> tuning;

  // The base profile with the knobs applied.
  DcqcnParams params() const;
  // The value the file gives `knob` (vendor or debugfs name); nullopt when it lists none.
  std::optional<int64_t> knob(std::string_view knob_name) const;
  // The [tuning] value of `key` as TOML text; empty when absent.
  std::string tuning_value(std::string_view key) const;
};

// One problem of a profile file: where it is and which key (`knobs.rpg_ai_rate`, `profile.base`).
struct ProfileError {
  uint32_t line = 0;  // 1-based; 0 without a position
  uint32_t column = 0;
  std::string key;
  std::string message;
  // "file:line:column: key: message".
  std::string to_string(std::string_view file) const;
};

struct ProfileParse {
  DcqcnProfile profile;             // meaningful when errors is empty
  std::vector<ProfileError> errors;  // every problem of the file, in file order
  bool ok() const { return errors.empty(); }
};

// Parses a profile file's text; `file` names it in TOML syntax errors.
ProfileParse parse_dcqcn_profile(std::string_view text, std::string_view file);

// The file for `profile`, with `comment` lines ("# ...") at the top. Parsing it gives `profile` back.
std::string render_dcqcn_profile(const DcqcnProfile& profile, std::string_view comment = {});

// Every knob of `params` that shapes DCQCN's dynamics (all of cc::mlx5_knobs() but the CNP's DSCP and
// 802.1p priority, which are the network's marking plan, not congestion control), in table order.
std::vector<ProfileKnob> dynamics_knobs(const DcqcnParams& params);

}  // namespace rdmad::cc
