#include "rdmad/sim/output.h"

#include <fmt/format.h>
#include <fmt/os.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <fstream>
#include <ranges>
#include <stdexcept>

namespace rdmad::sim {
namespace {

std::string num(double v) { return fmt::format("{:.6g}", v); }

std::string json_string(const std::string& in) {
  std::string out = "\"";
  for (char c : in) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string pct_json(const Percentiles& p, bool with_p95) {
  if (with_p95 && p.count == 0) return "{\"p50\": null, \"p95\": null, \"p99\": null, \"count\": 0}";
  return with_p95
             ? fmt::format("{{\"p50\": {}, \"p95\": {}, \"p99\": {}, \"count\": {}}}", num(p.p50), num(p.p95),
                           num(p.p99), p.count)
             : fmt::format("{{\"p50\": {}, \"p99\": {}, \"max\": {}}}", num(p.p50), num(p.p99), num(p.max));
}

std::ofstream open(const std::filesystem::path& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(fmt::format("cannot write '{}'", path.string()));
  return out;
}

}  // namespace

std::string summary_json(const RunResults& r) {
  std::string j = "{\n";
  j += fmt::format("  \"scenario\": {},\n  \"seed\": {},\n", json_string(r.scenario), r.seed);
  j += fmt::format("  \"jain_index\": {},\n", r.jain_index < 0 ? "null" : num(r.jain_index));
  j += fmt::format("  \"jain_index_mean\": {},\n", r.jain_index_mean < 0 ? "null" : num(r.jain_index_mean));
  j += fmt::format("  \"jain_windows\": {},\n", r.jain_windows.size());
  j += fmt::format("  \"jain_bursts\": [{}],\n", fmt::join(r.jain_bursts | std::views::transform(num), ", "));
  j += fmt::format("  \"bottleneck_utilization\": {},\n", num(r.bottleneck_utilization));
  j += "  \"ports\": [";
  for (size_t i = 0; i < r.port_utilization.size(); ++i) {
    const PortUtilization& u = r.port_utilization[i];
    j += fmt::format(
        "{}\n    {{\"port\": {}, \"busy_ms\": {}, \"data_bytes\": {}, \"busy_utilization\": {}, "
        "\"utilization\": {}, \"goodput_bytes\": {}, \"busy_goodput\": {}}}",
        i ? "," : "", json_string(i < r.port_names.size() ? r.port_names[i] : std::string()), num(u.busy_ms),
        u.data_bytes, num(u.busy_utilization), num(u.utilization), u.goodput_bytes, num(u.busy_goodput));
  }
  j += r.port_utilization.empty() ? "],\n" : "\n  ],\n";
  j += fmt::format("  \"queue_bytes\": {},\n", pct_json(r.queue_bytes, false));
  j += fmt::format("  \"pfc_paused_ms\": {},\n", num(r.pfc_paused_ms));
  j += fmt::format("  \"pfc_pauses\": {},\n  \"drops\": {},\n  \"cnps_sent\": {},\n  \"ecn_marks\": {},\n",
                   r.pfc_pauses, r.drops, r.cnps_sent, r.ecn_marks);
  const TransportCounters& t = r.transport;
  j += fmt::format("  \"bottleneck_goodput\": {},\n  \"delivered_bytes\": {},\n  \"goodput_gbps\": {},\n",
                   num(r.bottleneck_goodput), r.delivered_bytes, num(r.goodput_gbps));
  j += fmt::format(
      "  \"acks\": {},\n  \"wire_losses\": {},\n  \"acks_sent\": {},\n  \"naks_sent\": {},\n"
      "  \"timeouts\": {},\n  \"rewinds\": {},\n  \"retransmitted_packets\": {},\n"
      "  \"retransmitted_bytes\": {},\n  \"out_of_order_packets\": {},\n  \"duplicate_packets\": {},\n",
      t.acks, t.wire_losses, t.acks_sent, t.naks_sent, t.timeouts, t.rewinds, t.retransmitted_packets,
      t.retransmitted_bytes, t.out_of_order_packets, t.duplicate_packets);
  j += "  \"fct_slowdown\": {";
  for (size_t i = 0; i < r.fct_slowdown.size(); ++i) {
    j += fmt::format("{}\n    \"{}\": {}", i ? "," : "", r.fct_slowdown[i].label,
                     pct_json(r.fct_slowdown[i].slowdown, true));
  }
  j += "\n  },\n";
  j += fmt::format("  \"flows_total\": {},\n  \"flows_completed\": {},\n", r.flows_total, r.flows_completed);
  j += "  \"collectives\": [";
  for (size_t i = 0; i < r.collectives.size(); ++i) {
    const CollectiveResult& c = r.collectives[i];
    const auto time = [](double us) { return us < 0 ? std::string("null") : num(us); };
    j += fmt::format(
        "{}\n    {{\"name\": {}, \"kind\": {}, \"algorithm\": {}, \"ranks\": {}, \"rails\": {}, "
        "\"size_bytes\": {}, \"flows\": {}, \"flows_completed\": {}, \"start_us\": {}, "
        "\"completion_us\": {}, \"phases_us\": [{}]}}",
        i ? "," : "", json_string(c.name), json_string(c.kind),
        c.algorithm.empty() ? std::string("null") : json_string(c.algorithm), c.ranks, c.rails, c.size_bytes,
        c.flows, c.flows_completed, num(c.start_us), time(c.completion_us),
        fmt::join(c.phases_us | std::views::transform(time), ", "));
  }
  j += r.collectives.empty() ? "],\n" : "\n  ],\n";
  j += fmt::format("  \"simulated_ms\": {},\n  \"events\": {},\n  \"packet_hops\": {},\n",
                   num(r.simulated_ms), r.events, r.packet_hops);
  j += fmt::format("  \"warnings\": [{}],\n",
                   fmt::join(r.warnings | std::views::transform(json_string), ", "));
  j += fmt::format("  \"wall_seconds\": {}\n}}\n", fmt::format("{:.3f}", r.wall_seconds));
  return j;
}

void write_outputs(const RunResults& r, const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot create '{}': {}", dir.string(), ec.message()));
  open(dir / "summary.json") << summary_json(r);

  auto fct = open(dir / "fct.csv");
  fct << "flow,src,dst,size_bytes,start_ns,fct_ns,ideal_ns,slowdown\n";
  for (const auto& f : r.fct) {
    fct << fmt::format("{},{},{},{},{},{},{},{}\n", f.flow, f.src, f.dst, f.size_bytes, f.start_ns, f.fct_ns,
                       f.ideal_ns, f.fct_ns < 0 ? std::string() : num(f.slowdown));
  }
  auto rates = open(dir / "rates.csv");
  rates << "time_us,flow,delivered_gbps,cc_rate_gbps\n";
  for (const auto& s : r.rates) {
    rates << fmt::format("{},{},{},{}\n", num(static_cast<double>(s.time_ns) / 1000), s.flow,
                         num(s.delivered_gbps), num(s.cc_rate_gbps));
  }
  auto queues = open(dir / "queues.csv");
  queues << "time_us,port,queue_bytes\n";
  for (const auto& q : r.queues) {
    queues << fmt::format("{},{},{}\n", num(static_cast<double>(q.time_ns) / 1000), r.port_names[q.port],
                          q.bytes);
  }
  // Per-port series: one file per measure, each port that has any of it.
  auto series = [&](const char* file, const char* column, auto values, auto has) {
    auto out = open(dir / file);
    out << "time_us,width_us,port," << column << "\n";
    for (const PortSeries& ps : r.port_series) {
      if (!has(ps)) continue;
      const std::vector<double>& v = values(ps);
      for (size_t k = 0; k < v.size(); ++k) {
        out << fmt::format("{},{},{},{}\n", num(static_cast<double>(r.series_start_ns[k]) / 1000),
                           num(static_cast<double>(r.series_width_ns[k]) / 1000), ps.port, num(v[k]));
      }
    }
  };
  series(
      "utilization.csv", "utilization", [](const PortSeries& ps) -> auto& { return ps.utilization; },
      [](const PortSeries& ps) { return ps.data_bytes > 0; });
  series(
      "pauses.csv", "paused", [](const PortSeries& ps) -> auto& { return ps.paused; },
      [](const PortSeries& ps) { return ps.paused_ms > 0; });
  auto nodes = open(dir / "topology_nodes.csv");
  nodes << "node,name,level,x\n";
  for (size_t i = 0; i < r.sketch_nodes.size(); ++i) {
    const SketchNode& n = r.sketch_nodes[i];
    nodes << fmt::format("{},{},{},{}\n", i, n.name, n.level, num(n.x));
  }
  auto links = open(dir / "topology_links.csv");
  links << "a,b,gbps,x_a,level_a,x_b,level_b\n";
  for (const SketchLink& l : r.sketch_links) {
    const SketchNode& a = r.sketch_nodes[l.a];
    const SketchNode& b = r.sketch_nodes[l.b];
    links << fmt::format("{},{},{},{},{},{},{}\n", a.name, b.name, num(l.gbps), num(a.x), a.level, num(b.x),
                         b.level);
  }
}

namespace {

// gnuplot lines for one per-port series (FILE.csv: time_us,width_us,port,value) as FILE.png: a step
// line for each of the 8 ports with the largest time-weighted sum (gnuplot's `top`).
std::string per_port_plot(const char* file, const char* title, const char* ylabel, const char* none) {
  return fmt::format(R"GP(set output "{0}.png"
set title "{1}"; set xlabel "time (us)"; set ylabel "{2}"; set yrange [0:1.05]
top_ports = top("{0}.csv")
if (strlen(top_ports) > 0) {{
  plot for [p in top_ports] "< awk -F, '$3 == \"".p."\"' {0}.csv" using 1:4 with steps title p
}} else {{
  eval empty("{3}")
}}
)GP",
                     file, title, ylabel, none);
}

}  // namespace

base::Status plot_outputs(const std::filesystem::path& dir) {
  // One gnuplot script; CSVs are long-format, so each flow/port is selected with a filter.
  // Every picture is always drawn: an empty series (output.max_rate_flows = 0, no finished flow)
  // gives a labelled empty frame instead of gnuplot's "x range is invalid", which would abort the
  // script and leave the later pictures undrawn.
  const std::string script =
      R"GP(set datafile separator ","
set terminal pngcairo size 1000,600 noenhanced
set key outside right
empty(what) = sprintf("set label 1 \"%s\" at graph 0.5, graph 0.5 center; set xrange [0:1]; set yrange [0:1]; plot NaN notitle; unset label 1; set autoscale xy", what)
set output "rates.png"
set title "per-flow delivered rate"
set xlabel "time (us)"; set ylabel "Gb/s"
flows = system("tail -n +2 rates.csv | cut -d, -f2 | sort -n -u | head -16 | tr '\n' ' '")
if (strlen(flows) > 0) {
  plot for [f in flows] "< awk -F, '$2 == ".f."' rates.csv" using 1:3 with lines title "flow ".f
} else {
  eval empty("no per-flow rate samples (output.max_rate_flows = 0)")
}
set output "queues.png"
set title "bottleneck queues"; set xlabel "time (us)"; set ylabel "bytes"
ports = system("tail -n +2 queues.csv | cut -d, -f2 | awk '!s[$0]++' | head -16 | tr '\n' ' '")
if (strlen(ports) > 0) {
  plot for [p in ports] "< awk -F, '$2 == \"".p."\"' queues.csv" using 1:3 with lines title p
} else {
  eval empty("no queue samples")
}
set output "fct_slowdown.png"
set title "FCT slowdown by flow size"; set xlabel "flow size (bytes)"; set ylabel "slowdown"
finished = system("awk -F, 'NR > 1 && $8 != \"\"' fct.csv | wc -l") + 0
if (finished > 0) {
  set logscale xy
  plot "fct.csv" using 4:8 with points pt 7 ps 0.3 notitle
} else {
  eval empty("no finished flows")
}
unset logscale
top(file) = system("awk -F, 'NR > 1 { s[$3] += $4 * $2 } END { for (p in s) print s[p], p }' ".file." | sort -k1,1gr -k2,2 | head -8 | cut -d' ' -f2 | tr '\n' ' '")
)GP" +
      per_port_plot("utilization", "port utilisation (data), the 8 busiest ports", "share of capacity",
                    "no port sent data") +
      per_port_plot("pauses", "PFC pause time, the 8 most paused ports", "share of time paused",
                    "no port was paused") +
      R"GP(# Topology sketch: hosts at the bottom, each switch level above; host links thin, switch links thick.
set output "topology.png"
hosts = system("awk -F, 'NR > 1 && $3 == 0' topology_nodes.csv | wc -l") + 0
switches = system("awk -F, 'NR > 1 && $3 > 0' topology_nodes.csv | wc -l") + 0
set title sprintf("topology: %d hosts, %d switches", hosts, switches); unset xlabel; set ylabel "level (0: hosts)"
unset key; set xrange [0:1]; set yrange [-0.5:*]; set offsets 0, 0, 0.3, 0; set format x ""; set ytics 1
link(host) = sprintf("< awk -F, 'NR > 1 && ($5 == 0 || $7 == 0) == %d' topology_links.csv", host)
plot link(1) using 4:5:($6 - $4):($7 - $5) with vectors nohead lc rgb "gray70" lw 1, \
     link(0) using 4:5:($6 - $4):($7 - $5) with vectors nohead lc rgb "gray40" lw 3, \
     "topology_nodes.csv" using 4:3:($3 > 0 ? 1 : 2) with points pt 7 ps 1.5 lc variable, \
     "topology_nodes.csv" using 4:3:(($3 > 0 || hosts <= 32) ? stringcolumn(2) : "") with labels offset 0,1 font ",8"
)GP";

  {
    std::ofstream out(dir / "plot.gp");
    out << script;
    if (!out) return base::Status::error("cannot write plot.gp");
  }
  std::string cmd = fmt::format("cd '{}' && gnuplot plot.gp 2>&1", dir.string());
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return base::Status::error("cannot start gnuplot");
  std::string output;
  char buf[512];
  while (fgets(buf, sizeof buf, pipe) != nullptr) output += buf;
  int rc = pclose(pipe);
  if (rc != 0) return base::Status::error(fmt::format("gnuplot failed ({}): {}", rc, output));
  return base::Status::success();
}

}  // namespace rdmad::sim
