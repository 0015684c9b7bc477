#pragma once
// The field table: one entry per configuration key {key, type, default, doc, validator}. It is the
// single source for parsing, the default config file and the reference documentation.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "rdmad/config/config.h"

namespace rdmad::config {

enum class FieldType : uint8_t { kString, kInt, kBool, kStringMap, kIntList, kDouble };

using StringMap = std::map<std::string, std::string>;
using IntList = std::vector<int64_t>;
// kDouble keys also accept TOML integers (`weight = 1000` means 1000.0).
using Value = std::variant<std::monostate, std::string, int64_t, bool, StringMap, IntList, double>;

struct Section {
  std::string name;  // "daemon", "nic", ...
  std::string doc;   // one sentence
  bool is_array = false;  // [[name]] array of tables
};

struct Field {
  std::string section;  // "daemon"
  std::string name;     // "log_level"
  FieldType type = FieldType::kString;
  // Default when the key is absent. monostate: no default; the key is optional (or `required`).
  Value default_value;
  std::string doc;       // one sentence
  std::string expected;  // what a valid value looks like, for errors and docs
  bool required = false;
  // Returns an empty string when the value is valid, else what was expected instead.
  std::function<std::string(const Value&)> validate;
  // Stores a valid value; `index` is the entry of an array section.
  std::function<void(Config&, size_t index, const Value&)> apply;

  std::string path() const { return section + "." + name; }
};

// All sections and fields, in documentation order.
std::span<const Section> sections();
std::span<const Field> fields();

// A backend option without a [[nic]] key of its own: the daemon fills it from other keys.
struct DerivedOption {
  std::string option;  // its name in the backend's table
  std::string from;    // the keys it comes from, for the docs
};
std::span<const DerivedOption> derived_nic_options();

// Renders a value as a TOML literal ("\"info\"", "4791", "0.25", "{ rack = \"r1\" }"); a double always
// renders as a TOML float ("1000.0").
std::string to_toml(const Value& v);
const char* type_name(FieldType t);

}  // namespace rdmad::config
