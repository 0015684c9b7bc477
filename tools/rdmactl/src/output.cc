#include "output.h"

#include <fmt/format.h>

#include <cstdio>

namespace rdmactl {

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
      continue;
    }
    out += c;
  }
  return out;
}

int fail(rdmad_client* c, const char* what, rdmad_status st) {
  std::fprintf(stderr, "rdmactl: %s: %s: %s\n", what, rdmad_strerror(st), rdmad_last_error(c));
  // A daemon that stopped or died under the request answered nothing: it is unreachable now.
  if (st == RDMAD_ERR_DAEMON_GONE || st == RDMAD_ERR_CONNECTION) return kExitUnreachable;
  return kExitDaemonError;
}

const char* link_name(rdmad_link_state s) {
  switch (s) {
    case RDMAD_LINK_UP: return "up";
    case RDMAD_LINK_DOWN: return "down";
    default: return "unknown";
  }
}

}  // namespace rdmactl
