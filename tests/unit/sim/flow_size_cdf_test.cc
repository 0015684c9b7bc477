#include "rdmad/sim/flow_size_cdf.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "rdmad/sim/rng.h"

namespace rdmad::sim {
namespace {

const std::filesystem::path kWorkloads = std::filesystem::path(RDMAD_SOURCE_DIR) / "sim" / "workloads";

TEST(FlowSizeCdfTest, ShippedTablesHaveThePublishedMeans) {
  // Means of the piecewise-linear distributions as computed in sim/workloads/README.md.
  EXPECT_DOUBLE_EQ(FlowSizeCdf::load(kWorkloads / "websearch.cdf").mean_bytes(), 1711250.0);
  EXPECT_NEAR(FlowSizeCdf::load(kWorkloads / "fb_hadoop.cdf").mean_bytes(), 120420.75, 1e-6);
  EXPECT_NEAR(FlowSizeCdf::load(kWorkloads / "alistorage2019.cdf").mean_bytes(), 40869.8, 0.1);
  EXPECT_NEAR(FlowSizeCdf::load(kWorkloads / "googlerpc2008.cdf").mean_bytes(), 2891.6, 1.0);
}

TEST(FlowSizeCdfTest, SamplesInterpolateLinearly) {
  FlowSizeCdf cdf = FlowSizeCdf::parse("0 0\n1000 50\n3000 100\n", "t");
  EXPECT_EQ(cdf.sample(0.0), 1u);  // a zero draw becomes one byte, as upstream does
  EXPECT_EQ(cdf.sample(0.25), 500u);
  EXPECT_EQ(cdf.sample(0.5), 1000u);
  EXPECT_EQ(cdf.sample(0.75), 2000u);
  EXPECT_DOUBLE_EQ(cdf.mean_bytes(), 500 * 0.5 + 2000 * 0.5);
}

TEST(FlowSizeCdfTest, SampleMeanConvergesToTableMean) {
  FlowSizeCdf cdf = FlowSizeCdf::load(kWorkloads / "websearch.cdf");
  Rng rng(7);
  double sum = 0;
  const int n = 400000;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(cdf.sample(rng.uniform()));
  EXPECT_NEAR(sum / n / cdf.mean_bytes(), 1.0, 0.02);
}

TEST(FlowSizeCdfTest, RejectsMalformedTables) {
  EXPECT_THROW(FlowSizeCdf::parse("0 0\n10 50\n", "t"), std::runtime_error);          // no 100
  EXPECT_THROW(FlowSizeCdf::parse("5 0\n10 100\n", "t"), std::runtime_error);         // no 0 0
  EXPECT_THROW(FlowSizeCdf::parse("0 0\n10 60\n10 100\n", "t"), std::runtime_error);  // not increasing
  EXPECT_THROW(FlowSizeCdf::parse("0 0\n10 sixty\n", "t"), std::runtime_error);
  EXPECT_THROW(FlowSizeCdf::load(kWorkloads / "missing.cdf"), std::runtime_error);
  try {
    FlowSizeCdf::parse("0 0\n10 50\n5 100\n", "file.cdf");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "file.cdf:3: both columns must increase strictly");
  }
}

}  // namespace
}  // namespace rdmad::sim
