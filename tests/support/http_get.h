#pragma once
// A minimal blocking HTTP/1.0 GET for tests (no dependency on curl).
#include <optional>
#include <string>

namespace rdmad::test {

struct HttpResponse {
  int status = 0;
  std::string body;
};

// GET http://host:port/path; nullopt if the connection fails.
std::optional<HttpResponse> http_get(const std::string& host, int port, const std::string& path);

}  // namespace rdmad::test
