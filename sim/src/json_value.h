#pragma once
// Just enough JSON to read back what rdmad-sim wrote (summary.json): objects, arrays, numbers,
// strings, true/false/null. Used by the tuning advisor to collect its candidates' results.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace rdmad::sim {

class JsonValue {
 public:
  using Object = std::map<std::string, JsonValue, std::less<>>;
  using Array = std::vector<JsonValue>;

  // Parses a whole document; throws std::runtime_error naming the offset of the first problem.
  static JsonValue parse(std::string_view text);

  bool is_null() const { return std::holds_alternative<std::monostate>(v_); }
  std::optional<double> number() const;
  const std::string* string() const { return std::get_if<std::string>(&v_); }
  const Array* array() const;
  // The member `key` of an object; nullptr when this is no object or has no such member.
  const JsonValue* get(std::string_view key) const;

 private:
  friend class JsonParser;
  std::variant<std::monostate, bool, double, std::string, std::shared_ptr<Array>, std::shared_ptr<Object>> v_;
};

}  // namespace rdmad::sim
