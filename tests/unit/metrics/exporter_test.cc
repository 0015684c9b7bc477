#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "rdmad/metrics/daemon_metrics.h"
#include "rdmad/metrics/exporter.h"
#include "support/http_get.h"

namespace rdmad::metrics {
namespace {

// Sends `request` as it is to 127.0.0.1:port and returns everything the server sent back.
std::string raw_request(int port, const std::string& request) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
    char buf[4096];
    for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

TEST(Exporter, BadAddressIsAnErrorWithTheAddress) {
  const auto e = Exporter::start("256.1.1.1:9842");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("cannot serve metrics on 256.1.1.1:9842"), std::string::npos)
      << e.status().message();
}

TEST(Exporter, ServesRegistryAndReplacesNodeLabels) {
  auto started = Exporter::start("127.0.0.1:0");
  ASSERT_TRUE(started.ok()) << started.status().message();
  auto e = std::move(started).value();
  ASSERT_GT(e->port(), 0);
  EXPECT_EQ(e->url(), "http://127.0.0.1:" + std::to_string(e->port()) + "/metrics");
  DaemonMetrics m(e->registry(), "1.2.3", "abc", 1000.5);
  m.set_node_labels({{"rack", "r1"}});
  m.set_node_labels({{"rack", "r2"}});
  m.reload_failed();
  const auto r = test::http_get("127.0.0.1", e->port(), "/metrics");
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->body.find("rdmad_build_info{commit=\"abc\",version=\"1.2.3\"} 1"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("rdmad_node_info{rack=\"r2\"} 1"), std::string::npos);
  EXPECT_EQ(r->body.find("rack=\"r1\""), std::string::npos);
  EXPECT_NE(r->body.find("rdmad_config_reloads_total{result=\"error\"} 1"), std::string::npos);
  EXPECT_NE(r->body.find("rdmad_start_time_seconds 1000.5"), std::string::npos);
}

// Plain-text handlers beside /metrics, on the same port: their status and body, HEAD without a
// body, other methods refused, other paths untouched.
TEST(Exporter, ServesHandlersBesideMetrics) {
  auto started = Exporter::start("127.0.0.1:0");
  ASSERT_TRUE(started.ok()) << started.status().message();
  auto e = std::move(started).value();
  int calls = 0;
  e->add_handler("/healthz", [&calls] {
    ++calls;
    return HttpAnswer{200, "ok\n"};
  });
  e->add_handler("/readyz", [] { return HttpAnswer{503, "not ready: no NIC up\n"}; });
  DaemonMetrics m(e->registry(), "1.2.3", "abc", 1.0);

  auto r = test::http_get("127.0.0.1", e->port(), "/healthz");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "ok\n");
  r = test::http_get("127.0.0.1", e->port(), "/readyz?verbose=1");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->body, "not ready: no NIC up\n");
  r = test::http_get("127.0.0.1", e->port(), "/metrics");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("rdmad_build_info"), std::string::npos);
  r = test::http_get("127.0.0.1", e->port(), "/healthzz");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 404);

  const std::string head = raw_request(e->port(), "HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << head;
  EXPECT_NE(head.find("Content-Length: 3\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n") << head;  // no body
  const std::string post = raw_request(e->port(), "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(post.rfind("HTTP/1.1 405 ", 0), 0u) << post;
  EXPECT_EQ(calls, 2);  // GET and HEAD
}

// Bounded: a request larger than kHttpMaxRequestBytes is refused, and the server goes on serving.
TEST(Exporter, RefusesOversizedRequestsAndKeepsServing) {
  auto started = Exporter::start("127.0.0.1:0");
  ASSERT_TRUE(started.ok()) << started.status().message();
  auto e = std::move(started).value();
  bool called = false;
  e->add_handler("/healthz", [&called] {
    called = true;
    return HttpAnswer{200, "ok\n"};
  });
  const std::string big = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " +
                          std::string(Exporter::kHttpMaxRequestBytes * 2, 'a') + "\r\n\r\n";
  const std::string answer = raw_request(e->port(), big);
  EXPECT_EQ(answer.find(" 200 "), std::string::npos) << answer.substr(0, 200);
  EXPECT_FALSE(called);
  const auto r = test::http_get("127.0.0.1", e->port(), "/healthz");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
}

}  // namespace
}  // namespace rdmad::metrics
