// The knob space of the tuning advisor: which knobs, over which ranges, walked how.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include "rdmad/sim/tune.h"

namespace rdmad::sim::tune {
namespace {

struct DefaultRange {
  std::string_view knob;
  int64_t lo;
  int64_t hi;
  Scale scale;
  bool in_default_space;
};

// Ranges a search may cover without leaving what DCQCN can do at 25-400 Gb/s (docs/tuning.md,
// "Knobs"): timers from a few µs to a few ms, rates from 1 Mb/s to a few Gb/s, the byte counter from
// a few frames to 10 MB (0, "off", is left out: the timer alone is a different algorithm). Knobs off
// the default space are searched only when named. rpg_max_rate (a cap on every flow), cnp_dscp and
// cnp_802p_prio (the network's marking plan) are never searched.
constexpr DefaultRange kRanges[] = {
    {"dce_tcp_g", 768, 1023, Scale::kLogGain, true},           // g from 1/1024 to 1/4
    {"dce_tcp_rtt", 1, 200, Scale::kLog, true},
    {"initial_alpha_value", 64, 1023, Scale::kLinear, false},
    {"rate_reduce_monitor_period", 1, 200, Scale::kLog, true},
    {"rpg_time_reset", 5, 2000, Scale::kLog, true},
    {"rpg_byte_reset", 4096, 10'000'000, Scale::kLog, true},
    {"rpg_threshold", 1, 10, Scale::kLinear, true},
    {"rpg_ai_rate", 1, 1000, Scale::kLog, true},
    {"rpg_hai_rate", 1, 5000, Scale::kLog, true},
    {"rpg_min_dec_fac", 0, 95, Scale::kLinear, true},
    {"rpg_gd", 10, 11, Scale::kLinear, false},  // the vendor's values (docs/dcqcn.md, "Knobs")
    {"rpg_min_rate", 1, 1000, Scale::kLog, false},
    {"rate_to_set_on_first_cnp", 0, 100'000, Scale::kLinear, false},
    {"clamp_tgt_rate", 0, 1, Scale::kLinear, false},
    {"clamp_tgt_rate_after_time_inc", 0, 1, Scale::kLinear, false},
    {"min_time_between_cnps", 1, 200, Scale::kLog, true},
};

// The quantity a scale is even in, and back.
double warp(Scale s, double v) {
  switch (s) {
    case Scale::kLinear: return v;
    case Scale::kLog: return std::log(v);
    case Scale::kLogGain: return -std::log(1024.0 - v);  // increasing in v, like the others
  }
  return v;
}
double unwarp(Scale s, double w) {
  switch (s) {
    case Scale::kLinear: return w;
    case Scale::kLog: return std::exp(w);
    case Scale::kLogGain: return 1024.0 - std::exp(-w);
  }
  return w;
}

const char* scale_name(Scale s) {
  switch (s) {
    case Scale::kLinear: return "lin";
    case Scale::kLog: return "log";
    case Scale::kLogGain: return "gain";
  }
  return "?";
}

int64_t parse_int(std::string_view text, std::string_view spec) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    throw std::invalid_argument(fmt::format("--knob {}: '{}' is not an integer", spec, text));
  return v;
}

}  // namespace

int64_t KnobRange::value(double u) const {
  u = std::clamp(u, 0.0, 1.0);
  const double w = warp(scale, static_cast<double>(lo)) + u * (warp(scale, static_cast<double>(hi)) - warp(scale, static_cast<double>(lo)));
  return std::clamp(static_cast<int64_t>(std::llround(unwarp(scale, w))), lo, hi);
}

double KnobRange::position(int64_t v) const {
  if (hi == lo) return 0;
  const double a = warp(scale, static_cast<double>(lo));
  const double b = warp(scale, static_cast<double>(hi));
  return std::clamp((warp(scale, static_cast<double>(std::clamp(v, lo, hi))) - a) / (b - a), 0.0, 1.0);
}

std::string KnobRange::text() const { return fmt::format("{}={}..{}:{}", knob->name, lo, hi, scale_name(scale)); }

std::vector<KnobRange> default_space() {
  std::vector<KnobRange> out;
  for (const DefaultRange& r : kRanges)
    if (r.in_default_space) out.push_back(*default_range(r.knob));
  return out;
}

std::optional<KnobRange> default_range(std::string_view knob) {
  const cc::Mlx5Knob* k = cc::find_mlx5_knob(knob);
  if (k == nullptr) return std::nullopt;
  for (const DefaultRange& r : kRanges)
    if (r.knob == k->name) return KnobRange{k, r.lo, r.hi, r.scale};
  return std::nullopt;
}

KnobRange parse_knob_range(std::string_view spec) {
  const size_t eq = spec.find('=');
  const std::string_view name = spec.substr(0, eq);
  const cc::Mlx5Knob* k = cc::find_mlx5_knob(name);
  if (k == nullptr) throw std::invalid_argument(fmt::format("--knob {}: not an mlx5 DCQCN knob", spec));
  std::optional<KnobRange> r = default_range(name);
  if (!r)
    throw std::invalid_argument(fmt::format(
        "--knob {}: {} is not searched (a rate cap or the CNP's marking, not DCQCN's dynamics)", spec, k->name));
  if (eq == std::string_view::npos) return *r;
  std::string_view rest = spec.substr(eq + 1);
  if (const size_t colon = rest.find(':'); colon != std::string_view::npos) {
    const std::string_view s = rest.substr(colon + 1);
    if (s == "lin") r->scale = Scale::kLinear;
    else if (s == "log") r->scale = Scale::kLog;
    else if (s == "gain") r->scale = Scale::kLogGain;
    else throw std::invalid_argument(fmt::format("--knob {}: scale '{}' is not lin, log or gain", spec, s));
    rest = rest.substr(0, colon);
  }
  const size_t dots = rest.find("..");
  if (dots == std::string_view::npos)
    throw std::invalid_argument(fmt::format("--knob {}: expected NAME=LO..HI[:lin|log|gain]", spec));
  r->lo = parse_int(rest.substr(0, dots), spec);
  r->hi = parse_int(rest.substr(dots + 2), spec);
  if (r->lo > r->hi || r->lo < k->min || r->hi > k->max)
    throw std::invalid_argument(
        fmt::format("--knob {}: the range must lie in the knob's [{}, {}] ({}) with LO <= HI", spec, k->min, k->max, k->unit));
  if (r->scale == Scale::kLog && r->lo < 1)
    throw std::invalid_argument(fmt::format("--knob {}: a log scale needs LO >= 1", spec));
  if (r->scale == Scale::kLogGain && (k->name != "dce_tcp_g"))
    throw std::invalid_argument(fmt::format("--knob {}: the gain scale is dce_tcp_g's", spec));
  return *r;
}

}  // namespace rdmad::sim::tune
