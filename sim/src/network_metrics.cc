// Measurement: periodic samples of per-flow rates and bottleneck queues, Jain's index over fixed
// windows, utilisation, FCT slowdown, and the progress line.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "network.h"

namespace rdmad::sim {
namespace {

struct BucketDef {
  const char* label;
  uint64_t lo;
  uint64_t hi;
};
constexpr BucketDef kBuckets[] = {
    {"<10KB", 0, 10'000},
    {"10KB-100KB", 10'000, 100'000},
    {"100KB-1MB", 100'000, 1'000'000},
    {"1MB-10MB", 1'000'000, 10'000'000},
    {">=10MB", 10'000'000, UINT64_MAX},
};

// jain_index / jain_index_mean: the minimum and mean of `indices` (left undefined when empty).
void set_jain(RunResults& r, const std::vector<double>& indices) {
  if (indices.empty()) return;
  r.jain_index = *std::min_element(indices.begin(), indices.end());
  double sum = 0;
  for (double j : indices) sum += j;
  r.jain_index_mean = sum / static_cast<double>(indices.size());
}

}  // namespace

Percentiles percentiles(std::vector<double>& v) {
  Percentiles p;
  p.count = v.size();
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * v.size())) - 1)];
  };
  p.p50 = rank(0.50);
  p.p95 = rank(0.95);
  p.p99 = rank(0.99);
  p.max = v.back();
  return p;
}

void Network::sample() {
  const double interval_ns = static_cast<double>(sample_ns_);
  const size_t n_rates = std::min<size_t>(flows_.size(), s_.output.max_rate_flows);
  for (size_t i = 0; i < n_rates; ++i) {
    Flow& f = flows_[i];
    if (f.start_ns > now_ || (!f.sending && f.recv_bytes == f.recv_at_sample)) continue;
    double cc_gbps = f.sending ? flow_rate_mbps(f) / 1000 : 0;
    rates_.push_back({now_, static_cast<uint32_t>(i),
                      static_cast<double>(f.recv_bytes - f.recv_at_sample) * 8 / interval_ns, cc_gbps});
    f.recv_at_sample = f.recv_bytes;
  }
  const bool measuring = now_ >= warmup_ns_;
  if (measuring && warmup_mark_ns_ < 0) {
    warmup_mark_ns_ = now_;
    for (uint32_t p : bottleneck_ports_) {
      ports_[p].tx_at_warmup = ports_[p].tx_wire_bytes;
      ports_[p].goodput_at_warmup = ports_[p].goodput_wire_bytes;
    }
    delivered_at_warmup_ = delivered_bytes_;
    for (Flow& f : flows_) f.recv_at_window = f.recv_bytes;
    next_window_ns_ = now_ + jain_window_ns_;
  }
  for (size_t i = 0; i < bottleneck_ports_.size(); ++i) {
    Port& p = ports_[bottleneck_ports_[i]];
    uint64_t q = p.queue_bytes[0] + p.queue_bytes[1];
    queue_samples_.push_back({now_, static_cast<uint32_t>(i), q});
    if (measuring && p.tx_wire_bytes != p.tx_at_sample) queue_values_.push_back(static_cast<double>(q));
    p.tx_at_sample = p.tx_wire_bytes;
    // A whole interval after the warm-up mark in which the port sent data counts as busy.
    const uint64_t data = p.tx_data_wire_bytes - p.data_at_sample;
    if (warmup_mark_ns_ >= 0 && last_sample_ns_ >= warmup_mark_ns_ && data > 0) {
      p.data_busy_ns += now_ - last_sample_ns_;
      p.data_busy_bytes += data;
      p.goodput_busy_bytes += p.goodput_wire_bytes - p.goodput_at_sample;
    }
    p.data_at_sample = p.tx_data_wire_bytes;
    p.goodput_at_sample = p.goodput_wire_bytes;
  }
  if (now_ - series_open_ns_ >= series_width_ns_) close_series_sample();
  last_sample_ns_ = now_;
  delivered_at_sample_ = delivered_bytes_;
  while (measuring && now_ >= next_window_ns_) {
    close_jain_window();
    next_window_ns_ += jain_window_ns_;
  }
  if (now_ + sample_ns_ <= end_ns_) events_.push(now_ + sample_ns_, EventKind::kSample, 0);
}

// Closes the open sample of every port's series at now_. When output.series_samples are closed,
// neighbours merge (sums of bytes and paused time) and later samples are twice as wide, so a run of
// any length keeps between half and all of that many.
void Network::close_series_sample() {
  series_start_.push_back(series_open_ns_);
  series_width_.push_back(now_ - series_open_ns_);
  for (size_t i = 0; i < ports_.size(); ++i) {
    Port& p = ports_[i];
    const SimTimeNs paused = paused_total(p);
    series_data_[i].push_back(p.tx_data_wire_bytes - p.data_at_series);
    series_paused_[i].push_back(paused - p.paused_at_series);
    p.data_at_series = p.tx_data_wire_bytes;
    p.paused_at_series = paused;
  }
  series_open_ns_ = now_;
  if (series_start_.size() < s_.output.series_samples) return;
  auto merge_pairs = [](auto& v, auto combine) {
    for (size_t k = 0; k < v.size() / 2; ++k) v[k] = combine(v[2 * k], v[2 * k + 1]);
    v.resize(v.size() / 2);
  };
  const auto sum = [](auto a, auto b) { return a + b; };
  merge_pairs(series_start_, [](SimTimeNs a, SimTimeNs) { return a; });
  merge_pairs(series_width_, sum);
  for (size_t i = 0; i < ports_.size(); ++i) {
    merge_pairs(series_data_[i], sum);
    merge_pairs(series_paused_[i], sum);
  }
  series_width_ns_ *= 2;
}

// The series of the ports that sent data or were paused, as shares of each sample.
void Network::collect_series(RunResults& r) const {
  r.series_start_ns = series_start_;
  r.series_width_ns = series_width_;
  for (uint32_t i = 0; i < ports_.size(); ++i) {
    const Port& p = ports_[i];
    const SimTimeNs paused = paused_total(p);
    r.pfc_paused_ms += static_cast<double>(paused) / 1e6;
    if (p.tx_data_wire_bytes == 0 && paused == 0) continue;
    PortSeries ps;
    ps.port = port_name(i);
    ps.data_bytes = static_cast<double>(p.tx_data_wire_bytes);
    ps.paused_ms = static_cast<double>(paused) / 1e6;
    for (size_t k = 0; k < series_start_.size(); ++k) {
      const auto width = static_cast<double>(series_width_[k]);
      // Mb/s = bits per µs: capacity in bits over t ns is rate_mbps·t/1000.
      ps.utilization.push_back(static_cast<double>(series_data_[i][k]) * 8000 /
                               (static_cast<double>(p.rate_mbps) * width));
      ps.paused.push_back(static_cast<double>(series_paused_[i][k]) / width);
    }
    r.port_series.push_back(std::move(ps));
  }
}

// Levels by breadth-first search from every host at once; within a level, nodes in index order.
void Network::collect_sketch(RunResults& r) const {
  std::vector<uint32_t> level(topo_.nodes(), kNone);
  std::vector<uint32_t> frontier;
  for (uint32_t h = 0; h < topo_.hosts; ++h) {
    level[h] = 0;
    frontier.push_back(h);
  }
  for (size_t k = 0; k < frontier.size(); ++k) {
    const uint32_t n = frontier[k];
    for (uint32_t p = node_first_port_[n]; p < node_first_port_[n + 1]; ++p) {
      const uint32_t m = ports_[ports_[p].peer].node;
      if (level[m] == kNone) {
        level[m] = level[n] + 1;
        frontier.push_back(m);
      }
    }
  }
  std::map<uint32_t, uint32_t> per_level;
  for (uint32_t n = 0; n < topo_.nodes(); ++n) ++per_level[level[n]];
  std::map<uint32_t, uint32_t> placed;
  for (uint32_t n = 0; n < topo_.nodes(); ++n) {
    const uint32_t i = placed[level[n]]++;
    r.sketch_nodes.push_back({node_name(n), level[n], (i + 0.5) / static_cast<double>(per_level[level[n]])});
  }
  for (const LinkSpec& l : topo_.links) r.sketch_links.push_back({l.a, l.b, l.gbps});
}

// Incast: Jain's index of each burst over its flows' mean rates (size / FCT); the flows of a burst
// share a start time. A burst with fewer than two finished flows has no index.
void Network::incast_jain(RunResults& r) const {
  std::map<SimTimeNs, std::vector<double>> bursts;
  for (uint32_t i : traffic_.incast_flows) {
    const Flow& f = flows_[i];
    if (f.finish_ns > f.start_ns && f.start_ns >= warmup_ns_) {
      bursts[f.start_ns].push_back(static_cast<double>(f.size_bytes) /
                                   static_cast<double>(f.finish_ns - f.start_ns));
    }
  }
  for (const auto& [start, x] : bursts) {
    double sum = 0;
    double sum_sq = 0;
    for (double v : x) {
      sum += v;
      sum_sq += v * v;
    }
    if (x.size() >= 2) r.jain_bursts.push_back(sum * sum / (static_cast<double>(x.size()) * sum_sq));
  }
  set_jain(r, r.jain_bursts);
}

// Jain's index over the flows active for the whole window [next_window − W, next_window).
void Network::close_jain_window() {
  if (!traffic_.jain_windows) return;
  const SimTimeNs start = next_window_ns_ - jain_window_ns_;
  const std::vector<uint8_t>& counted = traffic_.window_flows;  // empty: every flow
  double sum = 0;
  double sum_sq = 0;
  uint32_t n = 0;
  for (size_t i = 0; i < flows_.size(); ++i) {
    Flow& f = flows_[i];
    bool whole = (counted.empty() || counted[i] != 0) && f.start_ns <= start &&
                 (f.finish_ns < 0 || f.finish_ns >= next_window_ns_);
    if (whole) {
      double x = static_cast<double>(f.recv_bytes - f.recv_at_window);
      sum += x;
      sum_sq += x * x;
      ++n;
    }
    f.recv_at_window = f.recv_bytes;
  }
  if (n >= 2 && sum_sq > 0) jain_windows_.push_back(sum * sum / (n * sum_sq));
}

RunResults Network::collect(double wall_seconds) {
  RunResults r;
  r.scenario = s_.name;
  r.seed = s_.seed;
  r.jain_windows = jain_windows_;
  r.warnings = warnings_;
  set_jain(r, jain_windows_);
  if (!traffic_.incast_flows.empty()) incast_jain(r);
  // Utilisation over the ports that carry data, over the time they are busy: data wire bytes sent in
  // the busy intervals over the capacity of those intervals, summed over ports (so a port busy
  // longer weighs more). Ports that only carry CNPs (toward the senders) never count.
  double busy_bits = 0;
  double goodput_bits = 0;
  double busy_capacity_bits = 0;
  uint64_t max_queue = 0;
  const double measured_ns =
      warmup_mark_ns_ >= 0 ? static_cast<double>(std::max<SimTimeNs>(0, last_sample_ns_ - warmup_mark_ns_))
                           : 0;
  for (uint32_t pi : bottleneck_ports_) {
    const Port& p = ports_[pi];
    max_queue = std::max(max_queue, p.max_queue_bytes);
    // Mb/s = bits per µs: capacity in bits over t ns is rate_mbps·t/1000.
    const double capacity_bits =
        static_cast<double>(p.rate_mbps) * static_cast<double>(p.data_busy_ns) / 1000;
    PortUtilization u;
    u.busy_ms = static_cast<double>(p.data_busy_ns) / 1e6;
    u.data_bytes = p.data_busy_bytes;
    u.busy_utilization = capacity_bits > 0 ? static_cast<double>(p.data_busy_bytes) * 8 / capacity_bits : 0;
    u.utilization = measured_ns > 0 ? static_cast<double>(p.tx_at_sample - p.tx_at_warmup) * 8000.0 /
                                          static_cast<double>(p.rate_mbps) / measured_ns
                                    : 0;
    u.goodput_bytes = p.goodput_busy_bytes;
    u.busy_goodput = capacity_bits > 0 ? static_cast<double>(p.goodput_busy_bytes) * 8 / capacity_bits : 0;
    r.port_utilization.push_back(u);
    busy_bits += static_cast<double>(p.data_busy_bytes) * 8;
    goodput_bits += static_cast<double>(p.goodput_busy_bytes) * 8;
    busy_capacity_bits += capacity_bits;
  }
  r.bottleneck_utilization = busy_capacity_bits > 0 ? busy_bits / busy_capacity_bits : 0;
  r.bottleneck_goodput = busy_capacity_bits > 0 ? goodput_bits / busy_capacity_bits : 0;
  r.delivered_bytes = delivered_bytes_;
  // Bits per ns are Gb/s.
  r.goodput_gbps = measured_ns > 0
                       ? static_cast<double>(delivered_at_sample_ - delivered_at_warmup_) * 8 / measured_ns
                       : 0;
  r.transport = {reliable_, wire_losses_,  acks_sent_,  naks_sent_,    timeouts_,
                 rewinds_,  retx_packets_, retx_bytes_, out_of_order_, duplicates_};
  r.queue_bytes = percentiles(queue_values_);
  r.queue_bytes.max = static_cast<double>(max_queue);
  r.pfc_pauses = pfc_pauses_;
  r.drops = drops_;
  r.cnps_sent = cnps_sent_;
  r.ecn_marks = ecn_marks_;
  r.events = events_run_;
  r.packet_hops = hops_;
  r.wall_seconds = wall_seconds;
  r.simulated_ms = static_cast<double>(now_) / 1e6;
  r.flows_total = static_cast<uint32_t>(flows_.size());
  r.flows_completed = flows_done_;
  std::vector<std::vector<double>> by_bucket(std::size(kBuckets));
  for (uint32_t i = 0; i < flows_.size(); ++i) {
    const Flow& f = flows_[i];
    if (f.size_bytes == 0) continue;
    FctRecord rec{i, f.src, f.dst, f.size_bytes, f.start_ns == kNoTime ? -1 : f.start_ns, -1, f.ideal_ns, 0};
    if (f.finish_ns >= 0) {
      rec.fct_ns = f.finish_ns - f.start_ns;
      rec.slowdown = std::max(1.0, static_cast<double>(rec.fct_ns) / static_cast<double>(f.ideal_ns));
      for (size_t b = 0; b < std::size(kBuckets); ++b) {
        if (f.size_bytes >= kBuckets[b].lo && f.size_bytes < kBuckets[b].hi)
          by_bucket[b].push_back(rec.slowdown);
      }
    }
    r.fct.push_back(rec);
  }
  for (size_t b = 0; b < std::size(kBuckets); ++b) {
    r.fct_slowdown.push_back({kBuckets[b].label, kBuckets[b].lo, kBuckets[b].hi, percentiles(by_bucket[b])});
  }
  collect_collectives(r);
  r.rates = std::move(rates_);
  r.queues = std::move(queue_samples_);
  for (uint32_t pi : bottleneck_ports_) r.port_names.push_back(port_name(pi));
  if (now_ > series_open_ns_) close_series_sample();
  collect_series(r);
  collect_sketch(r);
  return r;
}

// Each collective's completion: the arrival of the last byte of each phase, from its start.
void Network::collect_collectives(RunResults& r) const {
  for (const CollectiveSpec& c : traffic_.collectives) {
    CollectiveResult out;
    out.name = c.name;
    out.kind = c.kind;
    out.algorithm = c.algorithm;
    out.ranks = c.ranks;
    out.rails = c.rails;
    out.size_bytes = c.size_bytes;
    out.start_us = static_cast<double>(c.start_ns) / 1000;
    bool done = true;
    for (const auto& phase : c.phases) {
      SimTimeNs end = c.start_ns;
      for (uint32_t f : phase) {
        ++out.flows;
        if (delivered_ns_[f] >= 0) ++out.flows_completed;
        end = delivered_ns_[f] < 0 || end < 0 ? -1 : std::max(end, delivered_ns_[f]);
      }
      done = done && end >= 0;
      out.phases_us.push_back(end < 0 ? -1 : static_cast<double>(end - c.start_ns) / 1000);
    }
    if (done && !out.phases_us.empty())
      out.completion_us = *std::max_element(out.phases_us.begin(), out.phases_us.end());
    r.collectives.push_back(std::move(out));
  }
}

std::string Network::port_name(uint32_t port) const {
  return node_name(ports_[port].node) + "->" + node_name(ports_[ports_[port].peer].node);
}

std::string Network::node_name(uint32_t node) const { return topo_.node_name(node); }

void Network::progress(bool final) {
  if (!s_.progress) return;
  auto wall = std::chrono::steady_clock::now();
  double since_start = std::chrono::duration<double>(wall - wall_start_).count();
  if (!final && (since_start < 2.0 || std::chrono::duration<double>(wall - last_progress_).count() < 1.0))
    return;
  if (final && !progress_shown_) return;
  last_progress_ = wall;
  progress_shown_ = true;
  std::fprintf(stderr, "\rrdmad-sim: %.3f/%.3f ms simulated, %llu events, flows %u/%u done, %.2f M hops/s%s",
               static_cast<double>(now_) / 1e6, static_cast<double>(end_ns_) / 1e6,
               static_cast<unsigned long long>(events_run_), flows_done_, bounded_flows_,
               static_cast<double>(hops_) / 1e6 / std::max(since_start, 1e-9), final ? "\n" : "   ");
}

}  // namespace rdmad::sim
