#include "http_scrape.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>

namespace rdmad::bench {
namespace {

std::optional<std::string> gunzip(const std::string& in) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return std::nullopt;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  std::string out;
  char buf[65536];
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END) return std::nullopt;
  return out;
}

}  // namespace

size_t gzip_size(const std::string& text, int level) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY) != Z_OK) return 0;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  std::string out(deflateBound(&z, static_cast<uLong>(text.size())), '\0');
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  const size_t size = z.total_out;
  deflateEnd(&z);
  return rc == Z_STREAM_END ? size : 0;
}

std::optional<Scrape> scrape(int port, bool accept_gzip) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return std::nullopt;
  }
  std::string req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n";
  if (accept_gzip) req += "Accept-Encoding: gzip\r\n";
  req += "\r\n";
  if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return std::nullopt;
  }
  std::string raw;
  char buf[65536];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) raw.append(buf, static_cast<size_t>(n));
  close(fd);
  const auto sp = raw.find(' ');
  const auto hdr_end = raw.find("\r\n\r\n");
  if (sp == std::string::npos || hdr_end == std::string::npos) return std::nullopt;
  Scrape s;
  s.status = std::atoi(raw.c_str() + sp + 1);
  const std::string headers = raw.substr(0, hdr_end);
  s.gzip = strcasestr(headers.c_str(), "content-encoding: gzip") != nullptr;
  s.body = raw.substr(hdr_end + 4);
  s.wire_bytes = s.body.size();
  if (s.gzip) {
    auto plain = gunzip(s.body);
    if (!plain) return std::nullopt;
    s.body = std::move(*plain);
  }
  return s;
}

}  // namespace rdmad::bench
