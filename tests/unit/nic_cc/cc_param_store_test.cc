#include "rdmad/nic_cc/cc_param_store.h"

#include <gtest/gtest.h>

#include <map>

#include "unit/nic_cc/sysfs_fixture.h"

namespace rdmad::nic_cc {
namespace {

using rdmad::testing::sysfs_fixture;
using rdmad::testing::WritableFixture;

const KnobChange& change_of(const CcApplyReport& r, std::string_view name) {
  for (const auto& c : r.changes) {
    if (c.knob->name == name) return c;
  }
  ADD_FAILURE() << "no change for " << name;
  static const KnobChange kNone;
  return kNone;
}

TEST(NicCcParamLocation, BuildsVendorAndDebugfsPaths) {
  const auto* tr = cc::find_mlx5_knob("rpg_time_reset");
  const auto* dscp = cc::find_mlx5_knob("cnp_dscp");
  ASSERT_NE(tr, nullptr);
  ASSERT_NE(dscp, nullptr);
  EXPECT_EQ(CcParamLocation::vendor("eth0").knob_path(*tr), "/sys/class/net/eth0/ecn/roce_rp/rpg_time_reset");
  EXPECT_EQ(CcParamLocation::vendor("eth0").knob_path(*dscp), "/sys/class/net/eth0/ecn/roce_np/cnp_dscp");
  EXPECT_EQ(CcParamLocation::debugfs("0000:3b:00.0").knob_path(*tr),
            "/sys/kernel/debug/mlx5/0000:3b:00.0/cc_params/rp_time_reset");
  EXPECT_EQ(CcParamLocation::debugfs("0000:3b:00.0").knob_path(*dscp),
            "/sys/kernel/debug/mlx5/0000:3b:00.0/cc_params/np_cnp_dscp");
}

TEST(NicCcParamLocation, PrefersTheVendorTreeAndFallsBackToDebugfs) {
  const SysfsRoot vendor(sysfs_fixture("roce-vendor-ecn"));
  const auto v = locate_cc_params(vendor, "eth0", "0000:5e:00.0");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->source, CcParamSource::kVendorSysfs);
  const SysfsRoot upstream(sysfs_fixture("roce-cx6dx"));
  const auto d = locate_cc_params(upstream, "enp59s0f0np0", "0000:3b:00.0");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->source, CcParamSource::kUpstreamDebugfs);
  EXPECT_EQ(d->key, "0000:3b:00.0");
  EXPECT_FALSE(locate_cc_params(SysfsRoot(sysfs_fixture("ib-hdr")), "ibp129s0f0", "0000:81:00.0"));
}

TEST(NicCcParams, MapsTheVendorTreeOntoDcqcnParams) {
  const SysfsRoot root(sysfs_fixture("procfs"));
  const auto r = read_cc_params(root, CcParamLocation::vendor("eth0"));
  EXPECT_EQ(r.readable_count(), cc::mlx5_knobs().size());
  EXPECT_TRUE(r.unreadable().empty());
  // The fixture holds the firmware defaults except clamp_tgt_rate=1 and rate_to_set_on_first_cnp=10.
  cc::DcqcnParams expected = cc::mlx5_profile();
  expected.clamp_target_rate = true;
  expected.rate_on_first_cnp_mbps = 10;
  EXPECT_EQ(r.params, expected) << cc::describe(r.params);
  EXPECT_DOUBLE_EQ(r.params.alpha_gain, 5.0 / 1024);  // dce_tcp_g 1019
  EXPECT_DOUBLE_EQ(r.params.initial_alpha, 1023.0 / 1024);
  EXPECT_EQ(r.params.byte_counter_bytes, 32767u);  // bytes, not 64-byte blocks
  EXPECT_EQ(r.params.increase_timer_us, 300u);
  EXPECT_EQ(r.params.np_cnp_interval_us, 4u);
}

TEST(NicCcParams, MapsTheUpstreamDebugfsTreeOntoDcqcnParams) {
  const SysfsRoot root(sysfs_fixture("roce-cx6dx"));
  const auto p0 = read_cc_params(root, CcParamLocation::debugfs("0000:3b:00.0"));
  EXPECT_TRUE(p0.unreadable().empty());
  EXPECT_EQ(p0.params, cc::mlx5_profile()) << cc::describe(p0.params);
  const auto p1 = read_cc_params(root, CcParamLocation::debugfs("0000:3b:00.1"));
  EXPECT_EQ(p1.params.increase_timer_us, 55u);
  EXPECT_EQ(p1.params.rate_ai_mbps, 40u);
  EXPECT_EQ(p1.params.rate_hai_mbps, 200u);
  EXPECT_EQ(p1.params.fast_recovery_stages, 5u);
}

TEST(NicCcParams, UnreadableKnobsKeepTheBaseAndAreListed) {
  WritableFixture fx("roce-cx6dx");
  std::filesystem::remove(fx.path() / "sys/kernel/debug/mlx5/0000:3b:00.0/cc_params/rp_ai_rate");
  cc::DcqcnParams base = cc::mlx5_profile();
  base.rate_ai_mbps = 777;
  const auto r = read_cc_params(SysfsRoot(fx.path()), CcParamLocation::debugfs("0000:3b:00.0"), base);
  EXPECT_EQ(r.unreadable(), std::vector<std::string>{"rpg_ai_rate"});
  EXPECT_EQ(r.params.rate_ai_mbps, 777u);
  EXPECT_EQ(r.readable_count(), cc::mlx5_knobs().size() - 1);
}

TEST(NicCcApply, WritesOnlyChangedKnobsAndReadsThemBack) {
  WritableFixture fx("procfs");
  SysfsRoot root(fx.path());
  std::map<std::string, std::string> writes;
  root.set_write_filter_for_test(
      [&](std::string_view path, std::string_view value) -> std::optional<std::string> {
        writes[std::string(path.substr(path.rfind('/') + 1))] = std::string(value);
        return std::string(value);
      });
  cc::DcqcnParams want = cc::mlx5_profile();
  want.increase_timer_us = 55;
  want.rate_ai_mbps = 40;
  const auto loc = CcParamLocation::vendor("eth0");
  const auto report = apply_cc_params(root, loc, want);
  EXPECT_EQ(report.changes.size(), cc::mlx5_knobs().size());
  // The fixture's clamp_tgt_rate=1 and rate_to_set_on_first_cnp=10 differ from the profile too.
  EXPECT_EQ(writes, (std::map<std::string, std::string>{{"clamp_tgt_rate", "0"},
                                                        {"rate_to_set_on_first_cnp", "0"},
                                                        {"rpg_ai_rate", "40"},
                                                        {"rpg_time_reset", "55"}}));
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.applied().size(), 4u);
  EXPECT_EQ(change_of(report, "rpg_time_reset").before, 300);
  EXPECT_EQ(change_of(report, "rpg_time_reset").after, 55);
  EXPECT_EQ(change_of(report, "cnp_dscp").outcome, KnobOutcome::kUnchanged);
  EXPECT_EQ(report.effective, want);
  EXPECT_EQ(read_cc_params(root, loc).params, want);
}

TEST(NicCcApply, ReportsAKnobThatReadsBackDifferently) {
  WritableFixture fx("roce-cx6dx");
  SysfsRoot root(fx.path());
  // Firmware that keeps the increase timer in 64 µs steps and refuses AI rates above 100 Mb/s.
  root.set_write_filter_for_test(
      [](std::string_view path, std::string_view value) -> std::optional<std::string> {
        const auto v = parse_u64(value).value_or(0);
        if (path.ends_with("/rp_time_reset")) return std::to_string((v + 63) / 64 * 64);
        if (path.ends_with("/rp_ai_rate") && v > 100) return std::nullopt;
        return std::string(value);
      });
  cc::DcqcnParams want = cc::mlx5_profile();
  want.increase_timer_us = 55;
  want.rate_ai_mbps = 400;
  want.rate_hai_mbps = 100;
  const auto report = apply_cc_params(root, CcParamLocation::debugfs("0000:3b:00.0"), want);
  EXPECT_FALSE(report.ok());
  const auto& tr = change_of(report, "rpg_time_reset");
  EXPECT_EQ(tr.outcome, KnobOutcome::kNotTaken);
  EXPECT_EQ(tr.wanted, 55);
  EXPECT_EQ(tr.after, 64);
  EXPECT_EQ(tr.text(), "rpg_time_reset: wanted 55, device reads back 64");
  const auto& ai = change_of(report, "rpg_ai_rate");
  EXPECT_EQ(ai.outcome, KnobOutcome::kWriteFailed);
  EXPECT_NE(ai.error.find("rp_ai_rate"), std::string::npos);
  EXPECT_EQ(change_of(report, "rpg_hai_rate").outcome, KnobOutcome::kApplied);
  EXPECT_EQ(report.problems().size(), 2u);
  EXPECT_EQ(report.effective.increase_timer_us, 64u);
  EXPECT_EQ(report.effective.rate_ai_mbps, 5u);
  EXPECT_EQ(report.effective.rate_hai_mbps, 100u);
}

TEST(NicCcApply, RefusesOutOfRangeValuesWithoutWriting) {
  WritableFixture fx("procfs");
  SysfsRoot root(fx.path());
  int writes = 0;
  root.set_write_filter_for_test([&](std::string_view, std::string_view v) -> std::optional<std::string> {
    ++writes;
    return std::string(v);
  });
  cc::DcqcnParams want = cc::mlx5_profile();
  want.initial_alpha = 1.0;  // the paper's α0 = 1 is 1024/1024, one past the firmware's 1023
  const std::vector<std::string> only = {"initial_alpha_value"};
  const auto report = apply_cc_params(root, CcParamLocation::vendor("eth0"), want, only);
  ASSERT_EQ(report.changes.size(), 1u);
  EXPECT_EQ(report.changes[0].outcome, KnobOutcome::kOutOfRange);
  EXPECT_EQ(report.changes[0].wanted, 1024);
  EXPECT_EQ(writes, 0);
}

// rpg_gd: NVIDIA documents 10..11 (docs/dcqcn.md, "Knobs"); 9 and 12 are not written, 10 is.
TEST(NicCcApply, RefusesRpgGdOutsideTheVendorsValues) {
  WritableFixture fx("procfs");
  SysfsRoot root(fx.path());
  const std::vector<std::string> only = {"rpg_gd"};
  for (uint32_t gd : {9u, 12u, 1u, 15u}) {
    cc::DcqcnParams want = cc::mlx5_profile();
    want.rate_cut_gd_log2 = gd;
    const auto report = apply_cc_params(root, CcParamLocation::vendor("eth0"), want, only);
    ASSERT_EQ(report.changes.size(), 1u);
    EXPECT_EQ(report.changes[0].outcome, KnobOutcome::kOutOfRange) << gd;
    EXPECT_EQ(report.changes[0].text(), "rpg_gd: wanted " + std::to_string(gd) + " is outside [10, 11]; not written");
  }
  EXPECT_EQ(root.read_u64("/sys/class/net/eth0/ecn/roce_rp/rpg_gd").value(), 11u);
  cc::DcqcnParams want = cc::mlx5_profile();
  want.rate_cut_gd_log2 = 10;
  const auto report = apply_cc_params(root, CcParamLocation::vendor("eth0"), want, only);
  ASSERT_EQ(report.changes.size(), 1u);
  EXPECT_EQ(report.changes[0].outcome, KnobOutcome::kApplied);
  EXPECT_EQ(root.read_u64("/sys/class/net/eth0/ecn/roce_rp/rpg_gd").value(), 10u);
}

TEST(NicCcApply, LimitsToTheNamedKnobsInEitherSpelling) {
  WritableFixture fx("roce-cx6dx");
  const SysfsRoot root(fx.path());
  cc::DcqcnParams want = cc::paper_profile();
  const std::vector<std::string> only = {"rp_time_reset", "min_time_between_cnps"};
  const auto report = apply_cc_params(root, CcParamLocation::debugfs("0000:3b:00.0"), want, only);
  ASSERT_EQ(report.changes.size(), 2u);
  EXPECT_EQ(report.applied().size(), 2u);
  EXPECT_EQ(root.read_u64("/sys/kernel/debug/mlx5/0000:3b:00.0/cc_params/rp_time_reset").value(), 55u);
  EXPECT_EQ(root.read_u64("/sys/kernel/debug/mlx5/0000:3b:00.0/cc_params/np_min_time_between_cnps").value(),
            50u);
  EXPECT_EQ(root.read_u64("/sys/kernel/debug/mlx5/0000:3b:00.0/cc_params/rp_ai_rate").value(), 5u);
}

TEST(NicCcApply, MissingKnobIsReportedNotCreated) {
  WritableFixture fx("procfs");
  std::filesystem::remove(fx.path() / "sys/class/net/eth0/ecn/roce_rp/rpg_gd");
  const SysfsRoot root(fx.path());
  cc::DcqcnParams want = cc::mlx5_profile();
  want.rate_cut_gd_log2 = 10;
  const auto report = apply_cc_params(root, CcParamLocation::vendor("eth0"), want);
  const auto problems = report.problems();
  ASSERT_FALSE(problems.empty());
  EXPECT_EQ(change_of(report, "rpg_gd").outcome, KnobOutcome::kUnreadable);
  EXPECT_FALSE(root.exists("/sys/class/net/eth0/ecn/roce_rp/rpg_gd"));
}

}  // namespace
}  // namespace rdmad::nic_cc
