#include "rdmad/verbs/backend_options.h"

#include <fmt/format.h>

#include "rdmad/base/assert.h"

namespace rdmad::verbs {
namespace {

OptionType type_of(const OptionValue& v) {
  if (std::holds_alternative<int64_t>(v)) return OptionType::kInt;
  if (std::holds_alternative<bool>(v)) return OptionType::kBool;
  return OptionType::kString;
}

std::string render(const OptionValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  return fmt::format("\"{}\"", std::get<std::string>(v));
}

}  // namespace

const char* option_type_name(OptionType t) {
  switch (t) {
    case OptionType::kInt: return "integer";
    case OptionType::kBool: return "boolean";
    case OptionType::kString: return "string";
  }
  return "?";
}

std::string OptionSpec::expected() const {
  switch (type) {
    case OptionType::kInt: return fmt::format("an integer in [{}, {}]", min, max);
    case OptionType::kBool: return "true or false";
    case OptionType::kString: return expected_text.empty() ? "a string" : expected_text;
  }
  return "?";
}

OptionSpec OptionSpec::integer(std::string name, int64_t default_value, int64_t min, int64_t max, std::string help) {
  OptionSpec s;
  s.name = std::move(name);
  s.type = OptionType::kInt;
  s.default_value = default_value;
  s.min = min;
  s.max = max;
  s.help = std::move(help);
  return s;
}

OptionSpec OptionSpec::boolean(std::string name, bool default_value, std::string help) {
  OptionSpec s;
  s.name = std::move(name);
  s.type = OptionType::kBool;
  s.default_value = default_value;
  s.help = std::move(help);
  return s;
}

OptionSpec OptionSpec::text(std::string name, std::string default_value, std::string help,
                            std::function<std::string(const std::string&)> check, std::string expected_text) {
  OptionSpec s;
  s.name = std::move(name);
  s.type = OptionType::kString;
  s.default_value = std::move(default_value);
  s.help = std::move(help);
  s.check = std::move(check);
  s.expected_text = std::move(expected_text);
  return s;
}

std::string check_option(const OptionSpec& spec, const OptionValue& value) {
  if (type_of(value) != spec.type) return fmt::format("{} ({})", option_type_name(spec.type), spec.expected());
  if (const auto* i = std::get_if<int64_t>(&value); i != nullptr && (*i < spec.min || *i > spec.max))
    return spec.expected();
  if (const auto* s = std::get_if<std::string>(&value); s != nullptr && spec.check) return spec.check(*s);
  return "";
}

Result<OptionValues> OptionValues::parse(std::string_view backend, std::span<const OptionSpec> table,
                                         const BackendOptions& given) {
  OptionValues out;
  for (const OptionSpec& spec : table) out.values_.emplace(spec.name, spec.default_value);
  for (const auto& [name, value] : given) {
    auto it = out.values_.find(name);
    if (it == out.values_.end()) {
      std::vector<std::string> known;
      for (const OptionSpec& spec : table) known.push_back(spec.name);
      return Status::error(fmt::format("backend {} has no option '{}' (its options: {})", backend, name,
                                       fmt::join(known, ", ")));
    }
    for (const OptionSpec& spec : table) {
      if (spec.name != name) continue;
      if (std::string expected = check_option(spec, value); !expected.empty())
        return Status::error(
            fmt::format("backend {} option {}: invalid value {}: expected {}", backend, name, render(value), expected));
    }
    it->second = value;
  }
  return out;
}

const OptionValue& OptionValues::at(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) RDMAD_BUG("option {} is not in the backend's table", name);
  return it->second;
}

int64_t OptionValues::integer(std::string_view name) const { return std::get<int64_t>(at(name)); }
bool OptionValues::boolean(std::string_view name) const { return std::get<bool>(at(name)); }
const std::string& OptionValues::text(std::string_view name) const { return std::get<std::string>(at(name)); }

}  // namespace rdmad::verbs
