#include "rdmad/verbs/types.h"

#include <arpa/inet.h>

#include "rdmad/verbs/status.h"

namespace rdmad::verbs {

std::optional<Gid> Gid::from_ip(std::string_view ip) {
  std::string s(ip);
  Gid g;
  in_addr v4{};
  if (inet_pton(AF_INET, s.c_str(), &v4) == 1) {
    g.raw[10] = 0xff;
    g.raw[11] = 0xff;
    const auto* b = reinterpret_cast<const uint8_t*>(&v4.s_addr);
    for (int i = 0; i < 4; ++i) g.raw[12 + i] = b[i];
    return g;
  }
  if (inet_pton(AF_INET6, s.c_str(), g.raw.data()) == 1) return g;
  return std::nullopt;
}

bool Gid::is_ipv4_mapped() const {
  for (int i = 0; i < 10; ++i) {
    if (raw[i] != 0) return false;
  }
  return raw[10] == 0xff && raw[11] == 0xff;
}

std::string Gid::to_ip_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (is_ipv4_mapped()) {
    inet_ntop(AF_INET, raw.data() + 12, buf, sizeof buf);
  } else {
    inet_ntop(AF_INET6, raw.data(), buf, sizeof buf);
  }
  return buf;
}

std::string_view to_string(WcStatus status) {
  switch (status) {
    case WcStatus::kSuccess: return "success";
    case WcStatus::kLocalLengthError: return "local length error";
    case WcStatus::kLocalProtectionError: return "local protection error";
    case WcStatus::kRemoteAccessError: return "remote access error";
    case WcStatus::kRemoteInvalidRequest: return "remote invalid request";
    case WcStatus::kRemoteOperationalError: return "remote operational error";
    case WcStatus::kRetryExceeded: return "transport retry counter exceeded";
    case WcStatus::kRnrRetryExceeded: return "RNR retry counter exceeded";
    case WcStatus::kWrFlushed: return "work request flushed";
    case WcStatus::kLocalQpOperationError: return "local QP operation error";
    case WcStatus::kGeneralError: return "general error";
  }
  return "unknown";
}

std::string_view to_string(QpState state) {
  switch (state) {
    case QpState::kReset: return "RESET";
    case QpState::kInit: return "INIT";
    case QpState::kRtr: return "RTR";
    case QpState::kRts: return "RTS";
    case QpState::kError: return "ERR";
  }
  return "unknown";
}

}  // namespace rdmad::verbs
