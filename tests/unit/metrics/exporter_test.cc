#include <gtest/gtest.h>

#include "rdmad/metrics/daemon_metrics.h"
#include "rdmad/metrics/exporter.h"
#include "support/http_get.h"

namespace rdmad::metrics {
namespace {

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

}  // namespace
}  // namespace rdmad::metrics
