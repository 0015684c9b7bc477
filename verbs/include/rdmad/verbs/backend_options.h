#pragma once
// A backend's options: each backend declares its table (BackendInfo::options) and reads what a
// NIC's DeviceConfig::backend_options sets through it, into an options struct of its own. The
// types are neutral on purpose: configuration generates a [[nic]] key from every table entry
// without knowing any backend, and the checks here are the only ones, at load and at open.
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "rdmad/verbs/status.h"

namespace rdmad::verbs {

enum class OptionType : uint8_t { kInt, kBool, kString };

/// One option's value. Integers are int64_t whatever the backend stores, so that any range fits.
using OptionValue = std::variant<int64_t, bool, std::string>;
/// Option name -> value; names a backend's table does not have are refused at open.
using BackendOptions = std::map<std::string, OptionValue, std::less<>>;

/// One entry of a backend's option table.
struct OptionSpec {
  std::string name;  // snake_case, with its unit in the name ("busy_poll_us")
  OptionType type = OptionType::kInt;
  OptionValue default_value;
  int64_t min = 0;  // kInt: the valid range, inclusive
  int64_t max = 0;
  std::string help;  // what it does and when to change it
  // kString: "" when the text is valid, else what was expected instead; null accepts any text.
  std::function<std::string(const std::string&)> check;
  std::string expected_text;  // kString: what a valid value looks like ("an IPv4 or IPv6 address")

  /// What a valid value looks like: "an integer in [0, 65535]", "true or false", expected_text.
  std::string expected() const;

  static OptionSpec integer(std::string name, int64_t default_value, int64_t min, int64_t max, std::string help);
  static OptionSpec boolean(std::string name, bool default_value, std::string help);
  /// `check` may be null (any text is valid).
  static OptionSpec text(std::string name, std::string default_value, std::string help,
                         std::function<std::string(const std::string&)> check, std::string expected_text);
};

const char* option_type_name(OptionType t);

/// "" when `value` is valid for `spec`, else what was expected instead.
std::string check_option(const OptionSpec& spec, const OptionValue& value);

/// A table's options with every default filled in, each checked against its entry.
class OptionValues {
 public:
  /// An error names the backend and the key: one the table does not have, a value of the wrong
  /// type or out of range.
  static Result<OptionValues> parse(std::string_view backend, std::span<const OptionSpec> table,
                                    const BackendOptions& given);

  // The value of a table entry (a name outside the table is a bug).
  int64_t integer(std::string_view name) const;
  bool boolean(std::string_view name) const;
  const std::string& text(std::string_view name) const;

 private:
  const OptionValue& at(std::string_view name) const;
  BackendOptions values_;
};

}  // namespace rdmad::verbs
