// DCQCN parameters changed at run time on a soft NIC (what `rdmactl cc set` does): the datapath
// reports the new values, a connected QP keeps moving data byte-exact across the change, and a
// backend that runs no CC of its own says so.
#include <gtest/gtest.h>

#include "verbs_test_util.h"

namespace rdmad::verbs::test {
namespace {

TEST(DcqcnLive, SoftNicTakesNewParametersWhileAQpMovesData) {
  DeviceConfig config = soft_config();
  config.backend_options["cc_enabled"] = true;
  std::string skip;
  Endpoint a, b;
  make_endpoint(a, open_device("soft", config, &skip));
  make_endpoint(b, open_device("soft", config, &skip));
  connect_pair(a, b);
  ASSERT_TRUE(a.dev->dcqcn_params().has_value());
  EXPECT_EQ(*a.dev->dcqcn_params(), config.dcqcn);

  std::vector<uint8_t> src(300'000), dst(300'000, 0);
  fill_pattern(src, 11);
  auto smr = std::move(a.pd->reg_mr(src.data(), src.size(), 0).value());
  auto dmr = std::move(b.pd->reg_mr(dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite).value());
  auto write_half = [&](size_t offset) {
    SendWr w;
    w.opcode = WrOpcode::kRdmaWrite;
    w.sge = {reinterpret_cast<uint64_t>(src.data() + offset), 150'000, smr->lkey()};
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data() + offset);
    w.rkey = dmr->rkey();
    ASSERT_TRUE(a.qp->post_send({&w, 1}).ok());
  };
  write_half(0);

  cc::DcqcnParams next = config.dcqcn;
  next.rate_ai_mbps = 42;
  next.cnp_dscp = 40;
  next.max_rate_mbps = 50'000;
  ASSERT_TRUE(a.dev->set_dcqcn_params(next).ok());
  EXPECT_EQ(*a.dev->dcqcn_params(), next);
  EXPECT_EQ(*b.dev->dcqcn_params(), config.dcqcn);  // per NIC

  write_half(150'000);
  auto wcs = wait_completions(*a.scq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[1].status, WcStatus::kSuccess);
  EXPECT_TRUE(src == dst);
}

TEST(DcqcnLive, ABackendWithoutSoftwareCcRefuses) {
  class NoCc final : public Device {
   public:
    const DeviceInfo& info() const override { return info_; }
    Result<PortInfo> query_port(uint8_t) const override { return Status::error("none"); }
    Result<std::unique_ptr<ProtectionDomain>> alloc_pd() override { return Status::error("none"); }
    Result<std::unique_ptr<CompletionQueue>> create_cq(uint32_t) override { return Status::error("none"); }
    NicCounters counters() const override { return {}; }

   private:
    DeviceInfo info_;
  } dev;
  EXPECT_FALSE(dev.dcqcn_params().has_value());
  EXPECT_EQ(dev.set_dcqcn_params(cc::mlx5_profile()).code(), StatusCode::kNotSupported);
}

}  // namespace
}  // namespace rdmad::verbs::test
