#pragma once
// Field values of log lines. Every line is `event key=value key=value ...` (docs/operations.md,
// "Log lines"); a value that is not one plain token goes in double quotes, so that a reader, grep
// or a logfmt parser can tell where it ends even when it holds an error message from elsewhere.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace rdmad::base {

/// `text` as a field value: unchanged when it is a non-empty run of printable characters other
/// than space, '"' and '='; otherwise in double quotes, with '"' and '\' escaped and control
/// characters written as \n, \t or \xNN.
std::string quote(std::string_view text);

/// The fields of a log line, as journald fields: every `key=value` after the event words becomes
/// ("RDMAD_" + KEY in upper case, the value unquoted), in line order. Keys are snake_case (the
/// journal allows A-Z, 0-9 and _); a token that is no such field is skipped.
std::vector<std::pair<std::string, std::string>> journal_fields(std::string_view line);

/// A value that formats as quote(text). The quoting happens only when the line is written (spdlog
/// formats no line below the logger's level), so a debug line costs nothing when debug is off.
/// Holds a view: use it inside the log call, as `error={}` with `base::q(st.message())`.
struct Quoted {
  std::string_view text;
};
inline Quoted q(std::string_view text) { return {text}; }

}  // namespace rdmad::base

template <>
struct fmt::formatter<rdmad::base::Quoted> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const rdmad::base::Quoted& v, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(rdmad::base::quote(v.text), ctx);
  }
};
