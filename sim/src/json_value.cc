#include "json_value.h"

#include <fmt/format.h>

#include <charconv>
#include <stdexcept>

namespace rdmad::sim {

class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : s_(text) {}

  JsonValue document() {
    JsonValue v = value();
    skip_space();
    if (at_ < s_.size()) fail("text after the document");
    return v;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    throw std::runtime_error(fmt::format("JSON: {} at offset {}", what, at_));
  }
  void skip_space() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\n' || s_[at_] == '\r' || s_[at_] == '\t')) ++at_;
  }
  bool take(char c) {
    skip_space();
    if (at_ < s_.size() && s_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!take(c)) fail(fmt::format("expected '{}'", c));
  }
  bool word(std::string_view w) {
    if (s_.substr(at_, w.size()) != w) return false;
    at_ += w.size();
    return true;
  }

  std::string string_body() {
    std::string out;
    while (at_ < s_.size() && s_[at_] != '"') {
      char c = s_[at_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= s_.size()) break;
      const char e = s_[at_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          unsigned code = 0;
          if (at_ + 4 > s_.size() || std::from_chars(s_.data() + at_, s_.data() + at_ + 4, code, 16).ec != std::errc())
            fail("bad \\u escape");
          at_ += 4;
          out += code < 0x80 ? static_cast<char>(code) : '?';  // the simulator escapes only control characters
          break;
        }
        default: out += e;
      }
    }
    if (at_ >= s_.size()) fail("unterminated string");
    ++at_;
    return out;
  }

  JsonValue value() {
    skip_space();
    if (at_ >= s_.size()) fail("unexpected end");
    JsonValue v;
    const char c = s_[at_];
    if (c == '{') {
      ++at_;
      auto obj = std::make_shared<JsonValue::Object>();
      if (!take('}')) {
        do {
          expect('"');
          std::string key = string_body();
          expect(':');
          (*obj)[std::move(key)] = value();
        } while (take(','));
        expect('}');
      }
      v.v_ = std::move(obj);
    } else if (c == '[') {
      ++at_;
      auto arr = std::make_shared<JsonValue::Array>();
      if (!take(']')) {
        do arr->push_back(value());
        while (take(','));
        expect(']');
      }
      v.v_ = std::move(arr);
    } else if (c == '"') {
      ++at_;
      v.v_ = string_body();
    } else if (word("true")) {
      v.v_ = true;
    } else if (word("false")) {
      v.v_ = false;
    } else if (word("null")) {
      v.v_ = std::monostate{};
    } else {
      double d = 0;
      auto [end, ec] = std::from_chars(s_.data() + at_, s_.data() + s_.size(), d);
      if (ec != std::errc()) fail("expected a value");
      at_ = static_cast<size_t>(end - s_.data());
      v.v_ = d;
    }
    return v;
  }

  std::string_view s_;
  size_t at_ = 0;
};

JsonValue JsonValue::parse(std::string_view text) { return JsonParser(text).document(); }

std::optional<double> JsonValue::number() const {
  if (const double* d = std::get_if<double>(&v_)) return *d;
  return std::nullopt;
}

const JsonValue::Array* JsonValue::array() const {
  const auto* a = std::get_if<std::shared_ptr<Array>>(&v_);
  return a != nullptr ? a->get() : nullptr;
}

const JsonValue* JsonValue::get(std::string_view key) const {
  const auto* o = std::get_if<std::shared_ptr<Object>>(&v_);
  if (o == nullptr) return nullptr;
  const auto it = (*o)->find(key);
  return it == (*o)->end() ? nullptr : &it->second;
}

}  // namespace rdmad::sim
