#include "rdmad/base/log_fields.h"

#include <cstdlib>

namespace rdmad::base {
namespace {

bool plain(unsigned char c) { return c > ' ' && c != '"' && c != '=' && c != 0x7f; }

}  // namespace

std::string quote(std::string_view text) {
  bool bare = !text.empty();
  for (unsigned char c : text) bare = bare && plain(c);
  if (bare) return std::string(text);
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < ' ' || c == 0x7f) {
          out += fmt::format("\\x{:02x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

std::vector<std::pair<std::string, std::string>> journal_fields(std::string_view line) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t i = 0;
  const size_t n = line.size();
  while (i < n) {
    while (i < n && line[i] == ' ') ++i;
    const size_t start = i;
    while (i < n && line[i] != ' ' && line[i] != '=' && line[i] != '"') ++i;
    if (i >= n || line[i] != '=' || i == start) {  // an event word, or something no field
      while (i < n && line[i] != ' ') {
        if (line[i] == '"') {  // skip a quoted run whole
          for (++i; i < n && line[i] != '"'; ++i)
            if (line[i] == '\\') ++i;
        }
        ++i;
      }
      continue;
    }
    std::string key = "RDMAD_";
    bool valid = true;
    for (size_t k = start; k < i; ++k) {
      const char c = line[k];
      if (c >= 'a' && c <= 'z')
        key += static_cast<char>(c - 'a' + 'A');
      else if ((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')
        key += c;
      else
        valid = false;
    }
    ++i;  // '='
    std::string value;
    if (i < n && line[i] == '"') {
      for (++i; i < n && line[i] != '"'; ++i) {
        if (line[i] != '\\' || i + 1 >= n) {
          value += line[i];
          continue;
        }
        const char e = line[++i];
        if (e == 'n') {
          value += '\n';
        } else if (e == 't') {
          value += '\t';
        } else if (e == 'x' && i + 2 < n) {
          value += static_cast<char>(std::strtol(std::string(line.substr(i + 1, 2)).c_str(), nullptr, 16));
          i += 2;
        } else {
          value += e;
        }
      }
      ++i;  // closing '"'
    } else {
      while (i < n && line[i] != ' ') value += line[i++];
    }
    if (valid) out.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

}  // namespace rdmad::base
