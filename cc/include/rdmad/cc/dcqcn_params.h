#pragma once
// DCQCN parameters: one plain struct, units in every field name.
//
// Sources: Zhu et al., "Congestion Control for Large-Scale RDMA Deployments" (SIGCOMM 2015) for the
// `paper` profile; the ConnectX firmware defaults as exposed by the mlx5 driver (vendor sysfs
// /sys/class/net/<if>/ecn/roce_rp|roce_np/*, upstream debugfs mlx5/<bdf>/cc_params/*) for the
// `mlx5` profile. The mlx5 knob table below is the single mapping between the two unit systems; the
// daemon config, NIC CC management and docs all use it.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace rdmad::cc {

struct DcqcnParams {
  // ---- reaction point (sender, per QP) ----
  double alpha_gain = 0;                    // g in α ← (1−g)α + g; dce_tcp_g G means g = (1024−G)/1024
  uint32_t alpha_timer_us = 0;              // K: α decays once per K µs without CNPs (dce_tcp_rtt)
  double initial_alpha = 1.0;               // α of a new flow (initial_alpha_value / 1024)
  uint32_t rate_reduce_period_us = 0;       // at most one cut per period; 0 = cut on every CNP
  uint32_t increase_timer_us = 0;           // T_timer: rate-increase timer period (rpg_time_reset)
  uint64_t byte_counter_bytes = 0;          // B: increase event every B bytes sent; 0 disables
  uint32_t fast_recovery_stages = 0;        // F (rpg_threshold)
  uint32_t rate_ai_mbps = 0;                // R_AI, additive increase step
  uint32_t rate_hai_mbps = 0;               // R_HAI, hyper increase step
  // rpg_min_dec_fac (NVIDIA: "new_cur_rate >= min_dec_fac% * old_cur_rate"; 100 disables cuts): a cut
  // never takes Rc below this percent of its value before the cut. 0 = no floor.
  uint32_t min_dec_fac_pct = 0;
  uint32_t rate_cut_gd_log2 = 11;           // cut Rc·(1 − α·1024/2^gd): 11 is the classic α/2 (rpg_gd)
  uint32_t min_rate_mbps = 1;               // floor for Rc and Rt (rpg_min_rate)
  uint32_t max_rate_mbps = 0;               // ceiling below line rate; 0 = line rate (rpg_max_rate)
  uint32_t rate_on_first_cnp_mbps = 0;      // Rc and Rt after a flow's first CNP; 0 = the normal cut
  bool clamp_target_rate = false;           // every cut sets Rt ← Rc (pre-cut) (clamp_tgt_rate)
  // When clamp_target_rate is off: a cut sets Rt ← Rc if a byte-counter increase happened since the
  // previous cut, or (this flag) a timer increase; otherwise Rt keeps its value
  // (clamp_tgt_rate_after_time_inc: "update the target rate if the rate was increased due to the
  // timer, and not only due to the byte counter").
  bool clamp_target_rate_after_time_inc = true;
  // ---- notification point (receiver) ----
  uint32_t np_cnp_interval_us = 0;          // N: at most one CNP per QP per N µs (min_time_between_cnps)
  uint8_t cnp_dscp = 48;                    // DSCP of CNPs (cnp_dscp)
  uint8_t cnp_pcp = 6;                      // 802.1p priority of CNPs (cnp_802p_prio)

  bool operator==(const DcqcnParams&) const = default;
};

// Named profiles. `paper`: SIGCOMM'15 (R_HAI from the authors' sample configuration, 200 Mb/s).
// `mlx5`: ConnectX-4 and later firmware defaults.
DcqcnParams paper_profile();
DcqcnParams mlx5_profile();
// Looks a profile up by name ("paper", "mlx5"); nullopt for an unknown name.
std::optional<DcqcnParams> profile_by_name(std::string_view name);
inline constexpr std::string_view kProfileNames[] = {"paper", "mlx5"};

// One mlx5 DCQCN knob: where it lives on a real host and how its integer value maps onto
// DcqcnParams. Values are in the knob's own units (µs, Mb/s, bytes, 1/1024 steps, ...).
enum class KnobSide : uint8_t { kReactionPoint, kNotificationPoint };
struct Mlx5Knob {
  std::string_view name;          // vendor sysfs name under ecn/roce_rp|roce_np/, also the config key
  std::string_view debugfs_name;  // upstream debugfs name under mlx5/<bdf>/cc_params/
  KnobSide side;
  std::string_view unit;          // human unit of the knob value
  std::string_view doc;           // one sentence
  int64_t min;                    // inclusive range the firmware accepts
  int64_t max;
  int64_t (*get)(const DcqcnParams&);
  void (*set)(DcqcnParams&, int64_t);
};

// Every knob, in a stable order.
std::span<const Mlx5Knob> mlx5_knobs();
// Looks a knob up by its vendor sysfs name or its debugfs name; nullptr if unknown.
const Mlx5Knob* find_mlx5_knob(std::string_view name);

// Human-readable one-line summary ("g=1/205 K=1us F=1 ...") for logs.
std::string describe(const DcqcnParams& p);

}  // namespace rdmad::cc
