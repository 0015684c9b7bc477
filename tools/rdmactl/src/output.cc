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

bool for_each_diagnose_line(rdmad_client* c, const std::function<void(const std::string&)>& line) {
  std::string buf(16384, '\0');
  if (rdmad_diagnose(c, buf.data(), buf.size()) != RDMAD_OK) return false;
  buf.resize(buf.find('\0'));
  for (size_t start = 0; start < buf.size();) {
    size_t end = buf.find('\n', start);
    if (end == std::string::npos) end = buf.size();
    line(buf.substr(start, end - start));
    start = end + 1;
  }
  return true;
}

std::map<std::string, std::string> out_of_service_nics(rdmad_client* c) {
  std::map<std::string, std::string> out;
  const std::string prefix = "warn nic ";
  const std::string mark = ": out of service (";
  for_each_diagnose_line(c, [&](const std::string& line) {
    const size_t at = line.find(mark);
    if (line.rfind(prefix, 0) != 0 || at == std::string::npos) return;
    std::string rest = line.substr(at + mark.size());  // "device DEV): REASON"
    if (const size_t close = rest.find("): "); close != std::string::npos) rest.replace(close, 3, ": ");
    out[line.substr(prefix.size(), at - prefix.size())] = rest;
  });
  return out;
}

const char* link_name(rdmad_link_state s) {
  switch (s) {
    case RDMAD_LINK_UP: return "up";
    case RDMAD_LINK_DOWN: return "down";
    default: return "unknown";
  }
}

}  // namespace rdmactl
