// /metrics scrape cost on a large node (16 NICs, 500 uids, 1,024 flows: >= 10,000 series) against a
// ~100-series node, both served by rdmad's Exporter in the same process and scraped over real HTTP
// on loopback, interleaved so both see the same machine noise; the large node also with
// Accept-Encoding: gzip, as a Prometheus server asks. Then, in-process, the steps of one scrape of
// the large node: Registry::Collect, the scrape-time collector, TextSerializer, gzip. The program
// fails when a large body has fewer than 10,000 sample lines.
//
//   metrics_scrape_bench [--scrapes N] [--dump FILE]   (--dump writes one large-node body)
#include <prometheus/text_serializer.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "http_scrape.h"
#include "large_node.h"
#include "rdmad/metrics/daemon_metrics.h"
#include "rdmad/metrics/exporter.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMinSeries = 10000;

struct Node {
  std::unique_ptr<rdmad::metrics::Exporter> exporter;
  std::unique_ptr<rdmad::metrics::DaemonMetrics> daemon;
  std::shared_ptr<prometheus::Collectable> collector;
};

Node start_node(const rdmad::bench::NodeShape& shape) {
  Node n;
  auto exporter = rdmad::metrics::Exporter::start("127.0.0.1:0");
  if (!exporter.ok()) {
    std::fprintf(stderr, "%s\n", exporter.status().message().c_str());
    std::exit(1);
  }
  n.exporter = std::move(exporter).value();
  n.daemon = std::make_unique<rdmad::metrics::DaemonMetrics>(n.exporter->registry(), "0.0.0", "bench", 1.7e9);
  n.collector = rdmad::bench::populate_node(n.exporter->registry(), shape);
  n.exporter->add_collectable(n.collector);
  return n;
}

size_t sample_lines(const std::string& body) {
  size_t count = 0;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find('\n', pos);
    if (end == std::string::npos) end = body.size();
    if (end > pos && body[pos] != '#') ++count;
    pos = end + 1;
  }
  return count;
}

struct Series {
  const char* name;
  std::vector<double> ms;
  size_t bytes = 0;
  size_t samples = 0;
};

void report(Series& s) {
  std::sort(s.ms.begin(), s.ms.end());
  const size_t n = s.ms.size();
  const double p99 = s.ms[std::min(n - 1, (n * 99 + 99) / 100 - 1)];
  const std::string samples = s.samples == 0 ? "-" : std::to_string(s.samples);
  const std::string bytes = s.bytes == 0 ? "-" : std::to_string(s.bytes);
  std::printf("%-38s %7s %9s %9.3f %9.3f %9.3f\n", s.name, samples.c_str(), bytes.c_str(), s.ms[n / 2], p99,
              s.ms.back());
}

double time_ms(const std::function<void()>& f) {
  const auto t0 = Clock::now();
  f();
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// One HTTP scrape; exits loudly on any failure or on a body with too few samples.
void timed_scrape(const Node& node, bool gzip, size_t min_samples, Series& s) {
  std::optional<rdmad::bench::Scrape> r;
  s.ms.push_back(time_ms([&] { r = rdmad::bench::scrape(node.exporter->port(), gzip); }));
  if (!r || r->status != 200 || r->gzip != gzip) {
    std::fprintf(stderr, "%s: scrape failed (status %d)\n", s.name, r ? r->status : -1);
    std::exit(1);
  }
  s.bytes = r->wire_bytes;
  s.samples = sample_lines(r->body);
  if (s.samples < min_samples) {
    std::fprintf(stderr, "%s: %zu sample lines, expected at least %zu\n", s.name, s.samples, min_samples);
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int scrapes = 200;
  const char* dump = nullptr;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--scrapes") == 0) scrapes = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--dump") == 0) dump = argv[i + 1];
  }
  const Node large = start_node({});
  const Node small = start_node(
      {.nics = 1, .histograms_per_nic = 1, .priorities = 1, .flows_per_nic = 2, .uids = 2, .request_ops = 0});
  if (dump != nullptr) {
    const auto r = rdmad::bench::scrape(large.exporter->port(), false);
    std::ofstream(dump) << (r ? r->body : "");
  }
  Series base{"http, ~100 series (baseline)", {}}, plain{"http, large node", {}},
      gz{"http, large node, gzip", {}};
  for (int i = 0; i < scrapes + 5; ++i) {
    if (i == 5) base.ms.clear(), plain.ms.clear(), gz.ms.clear();  // the first 5 are warm-up
    timed_scrape(small, false, 50, base);
    timed_scrape(large, false, kMinSeries, plain);
    timed_scrape(large, true, kMinSeries, gz);
  }
  // In-process steps of one large scrape, as the Exposer's handler runs them before writing.
  Series reg{"  Registry::Collect", {}}, col{"  collector Collect (FamilySet)", {}},
      ser{"  TextSerializer", {}}, zip{"  gzip (the Exposer's zlib settings)", {}},
      fast{"  gzip at level 1 (for comparison)", {}};
  for (int i = 0; i < scrapes; ++i) {
    std::vector<prometheus::MetricFamily> families, more;
    reg.ms.push_back(time_ms([&] { families = large.exporter->registry().Collect(); }));
    col.ms.push_back(time_ms([&] { more = large.collector->Collect(); }));
    for (auto& f : more) families.push_back(std::move(f));
    std::string text;
    ser.ms.push_back(time_ms([&] { text = prometheus::TextSerializer().Serialize(families); }));
    ser.bytes = text.size();
    ser.samples = sample_lines(text);
    zip.ms.push_back(time_ms([&] { zip.bytes = rdmad::bench::gzip_size(text, Z_DEFAULT_COMPRESSION); }));
    fast.ms.push_back(time_ms([&] { fast.bytes = rdmad::bench::gzip_size(text, Z_BEST_SPEED); }));
  }
  std::printf("%d scrapes each (after 5 warm-up), milliseconds\n", scrapes);
  std::printf("%-38s %7s %9s %9s %9s %9s\n", "", "samples", "bytes", "p50", "p99", "max");
  for (Series* s : {&base, &plain, &gz, &reg, &col, &ser, &zip, &fast}) report(*s);
  return 0;
}
