#pragma once
// One blocking HTTP/1.0 GET of /metrics, the way a Prometheus server asks for it (optionally with
// Accept-Encoding: gzip), with the body inflated when it came compressed.
#include <optional>
#include <string>

namespace rdmad::bench {

struct Scrape {
  int status = 0;
  size_t wire_bytes = 0;  // body bytes as sent (compressed when gzip)
  bool gzip = false;      // the server answered Content-Encoding: gzip
  std::string body;       // the exposition text (inflated)
};

std::optional<Scrape> scrape(int port, bool accept_gzip);

// Compresses `text` the way prometheus-cpp 1.0's Exposer does (gzip wrapper, memLevel 9) at zlib
// `level` (the Exposer uses Z_DEFAULT_COMPRESSION) and returns the compressed size.
size_t gzip_size(const std::string& text, int level);

}  // namespace rdmad::bench
