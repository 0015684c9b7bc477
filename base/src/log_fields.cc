#include "rdmad/base/log_fields.h"

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

}  // namespace rdmad::base
