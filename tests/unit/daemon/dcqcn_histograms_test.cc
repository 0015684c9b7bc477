// The DCQCN rate histogram of soft NICs is in base units (bits per second) under
// rdmad_dcqcn_rate_bits_per_second; for one release the same samples also go to the old Mb/s
// name, rdmad_dcqcn_rate_mbps, whose help text says it is deprecated.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "rdmad/base/log.h"
#include "rdmad/daemon/nics/nic_slots.h"
#include "support/doubles/stub_device.h"

namespace rdmad::daemon {
namespace {

std::string scrape_after_one_sample() {
  log::setup(spdlog::level::off);
  verbs::BackendRegistry backends;
  verbs::BackendInfo soft;
  soft.name = "soft";
  soft.caps.software_cc = true;  // the histograms are of backends that pace in software
  soft.caps.needs_address = true;
  soft.open = [](const verbs::DeviceConfig& c) -> verbs::Result<std::unique_ptr<verbs::Device>> {
    // One QP pacing at 25 Gb/s.
    return std::unique_ptr<verbs::Device>(new StubDevice(c.name, {{25000, 40000, 0.5}}));
  };
  soft.list_devices = [] { return std::vector<std::string>{}; };
  backends.add(std::move(soft));
  config::Config cfg;
  config::NicSection n;
  n.name = "soft0";
  n.backend = "soft";
  cfg.nics = {n};
  NicSlots nics(backends);
  const base::Status st = nics.open(cfg);
  EXPECT_TRUE(st.ok()) << st.message();
  prometheus::Registry registry;
  nics.add_dcqcn_metrics(registry);
  nics.sample_dcqcn();
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

const std::string kLabels = "{device=\"soft0\",port=\"1\"";

TEST(DcqcnHistograms, RateIsInBitsPerSecondWithBucketsFrom10MbpsTo400Gbps) {
  const std::string text = scrape_after_one_sample();
  EXPECT_NE(text.find("# TYPE rdmad_dcqcn_rate_bits_per_second histogram"), std::string::npos) << text;
  const std::vector<double> expected{10e6, 100e6, 1e9, 10e9, 25e9, 50e9, 100e9, 200e9, 400e9};
  EXPECT_EQ(dcqcn_rate_buckets_bits_per_second(), expected);
  // 25 Gb/s: in the 25e9 bucket, not in the 10e9 one; the sum is in bits per second.
  const std::string bucket = "rdmad_dcqcn_rate_bits_per_second_bucket" + kLabels;
  EXPECT_NE(text.find(bucket + ",le=\"10000000000\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find(bucket + ",le=\"25000000000\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find(bucket + ",le=\"400000000000\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("rdmad_dcqcn_rate_bits_per_second_sum" + kLabels + "} 25000000000\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("rdmad_dcqcn_alpha_sum" + kLabels + "} 0.5\n"), std::string::npos) << text;
}

TEST(DcqcnHistograms, TheMbpsNameStaysForOneReleaseMarkedDeprecated) {
  const std::string text = scrape_after_one_sample();
  EXPECT_NE(text.find("# HELP rdmad_dcqcn_rate_mbps DEPRECATED: use rdmad_dcqcn_rate_bits_per_second; removed in "
                      "the next release\n"),
            std::string::npos)
      << text;
  const std::string bucket = "rdmad_dcqcn_rate_mbps_bucket" + kLabels;
  EXPECT_NE(text.find(bucket + ",le=\"10000\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find(bucket + ",le=\"25000\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("rdmad_dcqcn_rate_mbps_sum" + kLabels + "} 25000\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace rdmad::daemon
