#include "rdmad/cc/dcqcn_params.h"

#include <array>
#include <cmath>

#include <fmt/format.h>

namespace rdmad::cc {

DcqcnParams paper_profile() {
  DcqcnParams p;
  p.alpha_gain = 1.0 / 256;
  p.alpha_timer_us = 55;
  p.initial_alpha = 1.0;
  p.rate_reduce_period_us = 0;  // the paper cuts on every CNP
  p.increase_timer_us = 55;
  p.byte_counter_bytes = 10'000'000;  // "10 MB"
  p.fast_recovery_stages = 5;
  p.rate_ai_mbps = 40;
  p.rate_hai_mbps = 200;
  p.min_dec_fac_pct = 0;  // no floor on a cut (the paper has none; α/2 ≤ 50% anyway)
  p.rate_cut_gd_log2 = 11;
  p.min_rate_mbps = 1;  // the paper has no floor; a zero rate cannot be paced
  p.max_rate_mbps = 0;
  p.rate_on_first_cnp_mbps = 0;
  p.clamp_target_rate = true;  // SIGCOMM'15 Alg. 1: every cut sets Rt ← Rc
  p.clamp_target_rate_after_time_inc = false;
  p.np_cnp_interval_us = 50;
  p.cnp_dscp = 48;
  p.cnp_pcp = 6;
  return p;
}

DcqcnParams mlx5_profile() {
  DcqcnParams p;
  p.alpha_gain = 5.0 / 1024;  // dce_tcp_g = 1019
  p.alpha_timer_us = 1;
  p.initial_alpha = 1023.0 / 1024;
  p.rate_reduce_period_us = 4;
  p.increase_timer_us = 300;
  p.byte_counter_bytes = 32767;
  p.fast_recovery_stages = 1;
  p.rate_ai_mbps = 5;
  p.rate_hai_mbps = 50;
  p.min_dec_fac_pct = 50;  // a cut keeps at least half the rate
  p.rate_cut_gd_log2 = 11;
  p.min_rate_mbps = 1;
  p.max_rate_mbps = 0;
  p.rate_on_first_cnp_mbps = 0;
  p.clamp_target_rate = false;
  p.clamp_target_rate_after_time_inc = true;
  p.np_cnp_interval_us = 4;
  p.cnp_dscp = 48;
  p.cnp_pcp = 6;
  return p;
}

std::optional<DcqcnParams> profile_by_name(std::string_view name) {
  if (name == "paper") return paper_profile();
  if (name == "mlx5") return mlx5_profile();
  return std::nullopt;
}

namespace {

constexpr int64_t kMaxU32 = 0xffffffffLL;

// Fractions in 1/1024 steps, as the firmware stores them.
int64_t to_1024ths(double v) { return static_cast<int64_t>(std::llround(v * 1024.0)); }

const std::array kKnobs = {
    Mlx5Knob{"dce_tcp_g", "rp_dce_tcp_g", KnobSide::kReactionPoint, "1/1024 (g = (1024-G)/1024)",
             "alpha gain: each CNP moves alpha toward 1 by g, each alpha timer decays it by (1-g)", 0, 1023,
             [](const DcqcnParams& p) { return 1024 - to_1024ths(p.alpha_gain); },
             [](DcqcnParams& p, int64_t v) { p.alpha_gain = static_cast<double>(1024 - v) / 1024.0; }},
    Mlx5Knob{"dce_tcp_rtt", "rp_dce_tcp_rtt", KnobSide::kReactionPoint, "us",
             "alpha timer K: alpha decays once per this many microseconds without a CNP", 1, kMaxU32,
             [](const DcqcnParams& p) { return int64_t{p.alpha_timer_us}; },
             [](DcqcnParams& p, int64_t v) { p.alpha_timer_us = static_cast<uint32_t>(v); }},
    Mlx5Knob{"initial_alpha_value", "rp_initial_alpha_value", KnobSide::kReactionPoint, "1/1024",
             "alpha of a new flow, in 1/1024 steps", 0, 1023,
             [](const DcqcnParams& p) { return to_1024ths(p.initial_alpha); },
             [](DcqcnParams& p, int64_t v) { p.initial_alpha = static_cast<double>(v) / 1024.0; }},
    Mlx5Knob{"rate_reduce_monitor_period", "rp_rate_reduce_monitor_period", KnobSide::kReactionPoint, "us",
             "at most one rate cut per this many microseconds (CNPs inside it are coalesced); 0 cuts on every CNP",
             0, kMaxU32, [](const DcqcnParams& p) { return int64_t{p.rate_reduce_period_us}; },
             [](DcqcnParams& p, int64_t v) { p.rate_reduce_period_us = static_cast<uint32_t>(v); }},
    Mlx5Knob{"rpg_time_reset", "rp_time_reset", KnobSide::kReactionPoint, "us",
             "rate-increase timer period: one increase event per this many microseconds", 1, kMaxU32,
             [](const DcqcnParams& p) { return int64_t{p.increase_timer_us}; },
             [](DcqcnParams& p, int64_t v) { p.increase_timer_us = static_cast<uint32_t>(v); }},
    Mlx5Knob{"rpg_byte_reset", "rp_byte_reset", KnobSide::kReactionPoint, "bytes",
             "byte counter: one increase event per this many bytes sent; 0 disables it", 0, kMaxU32,
             [](const DcqcnParams& p) { return static_cast<int64_t>(p.byte_counter_bytes); },
             [](DcqcnParams& p, int64_t v) { p.byte_counter_bytes = static_cast<uint64_t>(v); }},
    Mlx5Knob{"rpg_threshold", "rp_threshold", KnobSide::kReactionPoint, "events",
             "fast-recovery stages F before additive increase starts", 1, 31,
             [](const DcqcnParams& p) { return int64_t{p.fast_recovery_stages}; },
             [](DcqcnParams& p, int64_t v) { p.fast_recovery_stages = static_cast<uint32_t>(v); }},
    Mlx5Knob{"rpg_ai_rate", "rp_ai_rate", KnobSide::kReactionPoint, "Mb/s",
             "additive-increase step of the target rate", 1, kMaxU32,
             [](const DcqcnParams& p) { return int64_t{p.rate_ai_mbps}; },
             [](DcqcnParams& p, int64_t v) { p.rate_ai_mbps = static_cast<uint32_t>(v); }},
    Mlx5Knob{"rpg_hai_rate", "rp_hai_rate", KnobSide::kReactionPoint, "Mb/s",
             "hyper-increase step of the target rate", 1, kMaxU32,
             [](const DcqcnParams& p) { return int64_t{p.rate_hai_mbps}; },
             [](DcqcnParams& p, int64_t v) { p.rate_hai_mbps = static_cast<uint32_t>(v); }},
    Mlx5Knob{"rpg_min_dec_fac", "rp_min_dec_fac", KnobSide::kReactionPoint, "percent",
             "a rate cut keeps the new rate at least this percent of the old one (100 disables cuts, 0 no floor)",
             0, 100, [](const DcqcnParams& p) { return int64_t{p.min_dec_fac_pct}; },
             [](DcqcnParams& p, int64_t v) { p.min_dec_fac_pct = static_cast<uint32_t>(v); }},
    Mlx5Knob{"rpg_gd", "rp_gd", KnobSide::kReactionPoint, "log2",
             "cut gain: a cut multiplies the rate by (1 - alpha*1024/2^gd); 11 is the classic alpha/2, 10 cuts by alpha",
             // NVIDIA lists 10..11 as rpg_gd's values (docs/dcqcn.md, "Knobs", [N2]); other values
             // have no documented meaning on a NIC, so nic_cc refuses to write them and configs reject them.
             10, 11,
             [](const DcqcnParams& p) { return int64_t{p.rate_cut_gd_log2}; },
             [](DcqcnParams& p, int64_t v) { p.rate_cut_gd_log2 = static_cast<uint32_t>(v); }},
    Mlx5Knob{"rpg_min_rate", "rp_min_rate", KnobSide::kReactionPoint, "Mb/s",
             "lowest rate a flow is ever cut to", 1, kMaxU32,
             [](const DcqcnParams& p) { return int64_t{p.min_rate_mbps}; },
             [](DcqcnParams& p, int64_t v) { p.min_rate_mbps = static_cast<uint32_t>(v); }},
    Mlx5Knob{"rpg_max_rate", "rp_max_rate", KnobSide::kReactionPoint, "Mb/s",
             "highest rate a flow may reach; 0 means line rate", 0, kMaxU32,
             [](const DcqcnParams& p) { return int64_t{p.max_rate_mbps}; },
             [](DcqcnParams& p, int64_t v) { p.max_rate_mbps = static_cast<uint32_t>(v); }},
    Mlx5Knob{"rate_to_set_on_first_cnp", "rp_rate_to_set_on_first_cnp", KnobSide::kReactionPoint, "Mb/s",
             "current and target rate a flow is set to on its first CNP (never above its maximum rate); 0 applies "
             "the normal cut",
             0, kMaxU32,
             [](const DcqcnParams& p) { return int64_t{p.rate_on_first_cnp_mbps}; },
             [](DcqcnParams& p, int64_t v) { p.rate_on_first_cnp_mbps = static_cast<uint32_t>(v); }},
    Mlx5Knob{"clamp_tgt_rate", "rp_clamp_tgt_rate", KnobSide::kReactionPoint, "0|1",
             "when 1, a cut sets the target rate to the current rate", 0, 1,
             [](const DcqcnParams& p) { return int64_t{p.clamp_target_rate ? 1 : 0}; },
             [](DcqcnParams& p, int64_t v) { p.clamp_target_rate = v != 0; }},
    Mlx5Knob{"clamp_tgt_rate_after_time_inc", "rp_clamp_tgt_rate_ati", KnobSide::kReactionPoint, "0|1",
             "when 1, a timer increase (as a byte-counter increase always does) makes the next cut set the target "
             "rate to the current rate",
             0, 1,
             [](const DcqcnParams& p) { return int64_t{p.clamp_target_rate_after_time_inc ? 1 : 0}; },
             [](DcqcnParams& p, int64_t v) { p.clamp_target_rate_after_time_inc = v != 0; }},
    Mlx5Knob{"min_time_between_cnps", "np_min_time_between_cnps", KnobSide::kNotificationPoint, "us",
             "notification point sends at most one CNP per QP per this many microseconds", 0, kMaxU32,
             [](const DcqcnParams& p) { return int64_t{p.np_cnp_interval_us}; },
             [](DcqcnParams& p, int64_t v) { p.np_cnp_interval_us = static_cast<uint32_t>(v); }},
    Mlx5Knob{"cnp_dscp", "np_cnp_dscp", KnobSide::kNotificationPoint, "dscp",
             "DSCP of CNP packets", 0, 63,
             [](const DcqcnParams& p) { return int64_t{p.cnp_dscp}; },
             [](DcqcnParams& p, int64_t v) { p.cnp_dscp = static_cast<uint8_t>(v); }},
    Mlx5Knob{"cnp_802p_prio", "np_cnp_prio", KnobSide::kNotificationPoint, "pcp",
             "802.1p priority of CNP packets", 0, 7,
             [](const DcqcnParams& p) { return int64_t{p.cnp_pcp}; },
             [](DcqcnParams& p, int64_t v) { p.cnp_pcp = static_cast<uint8_t>(v); }},
};

}  // namespace

std::span<const Mlx5Knob> mlx5_knobs() { return kKnobs; }

const Mlx5Knob* find_mlx5_knob(std::string_view name) {
  for (const auto& k : kKnobs) {
    if (k.name == name || k.debugfs_name == name) return &k;
  }
  return nullptr;
}

std::string describe(const DcqcnParams& p) {
  return fmt::format(
      "g={:.5f} K={}us alpha0={:.4f} cut_period={}us T={}us B={}B F={} ai={}Mbps hai={}Mbps min_dec_fac={}% "
      "min={}Mbps max={}Mbps np_interval={}us cnp_dscp={}",
      p.alpha_gain, p.alpha_timer_us, p.initial_alpha, p.rate_reduce_period_us, p.increase_timer_us,
      p.byte_counter_bytes, p.fast_recovery_stages, p.rate_ai_mbps, p.rate_hai_mbps, p.min_dec_fac_pct,
      p.min_rate_mbps, p.max_rate_mbps, p.np_cnp_interval_us, p.cnp_dscp);
}

}  // namespace rdmad::cc
