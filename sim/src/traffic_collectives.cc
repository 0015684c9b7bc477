// Collectives over a group of hosts (ranks, in the order named). Rank r's share on rail k leaves
// from and arrives at NIC k, so on a rail-optimised fabric a collective stays on its rails. A phase
// of a rank starts when the data of its previous phase has arrived at that rank (the dependency is
// modelled, not a timed schedule): each flow waits for one flow into its sender.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "traffic_builder.h"

namespace rdmad::sim {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace

void TrafficBuilder::collective(const TrafficSource& src) {
  const std::vector<uint32_t> ranks = hosts(src.hosts, src.loc, "hosts");
  const auto n = static_cast<uint32_t>(ranks.size());
  if (n < 2) {
    throw std::runtime_error(fmt::format(
        "{}: key 'traffic.source.hosts': a collective needs two hosts or more", src.loc.where("hosts")));
  }
  const bool hd =
      src.kind == SourceKind::kAllReduce && src.algorithm == CollectiveAlgorithm::kHalvingDoubling;
  if (hd && (n & (n - 1)) != 0) {
    throw std::runtime_error(fmt::format(
        "{}: key 'traffic.source.algorithm': halving_doubling needs a power of two of hosts ({} named)",
        src.loc.where("algorithm"), n));
  }
  if (check_only_) return;
  CollectiveSpec c;
  c.name = src.name;
  c.kind = src.kind == SourceKind::kAllReduce ? "allreduce" : "alltoall";
  if (src.kind == SourceKind::kAllReduce) c.algorithm = hd ? "halving_doubling" : "ring";
  c.ranks = n;
  c.rails = UINT32_MAX;
  for (uint32_t m : ranks) c.rails = std::min(c.rails, static_cast<uint32_t>(topo_.machines[m].nics.size()));
  c.size_bytes = src.size_bytes;
  c.start_ns = us_to_ns(src.start_us);
  if (src.kind == SourceKind::kAllToAll) {
    all_to_all(c, ranks, c.start_ns);
  } else if (hd) {
    halving_doubling(c, ranks, c.start_ns);
  } else {
    ring(c, ranks, c.start_ns);
  }
  collectives_.push_back(std::move(c));
}

// Ring AllReduce on every rail: 2(N−1) phases (reduce-scatter, then all-gather); in phase s rank r
// sends a chunk of size/(rails·N) to rank r+1 once phase s−1's chunk from rank r−1 has arrived.
void TrafficBuilder::ring(CollectiveSpec& c, const std::vector<uint32_t>& ranks, SimTimeNs start) {
  const uint32_t n = c.ranks;
  const uint64_t chunk = ceil_div(ceil_div(c.size_bytes, c.rails), n);
  c.phases.assign(2 * (n - 1), {});
  for (uint32_t k = 0; k < c.rails; ++k) {
    std::vector<uint32_t> prev(n, kNoFlow);  // per rank: its flow of the phase before
    for (uint32_t s = 0; s < 2 * (n - 1); ++s) {
      std::vector<uint32_t> cur(n);
      for (uint32_t r = 0; r < n; ++r) {
        const uint32_t from = topo_.machines[ranks[r]].nics[k];
        const uint32_t to = topo_.machines[ranks[(r + 1) % n]].nics[k];
        cur[r] = add(from, to, chunk, start, prev[(r + n - 1) % n]);
        c.phases[s].push_back(cur[r]);
      }
      prev = cur;
    }
  }
}

// Halving-doubling (Rabenseifner): log2 N reduce-scatter phases with partners N/2, N/4, … 1 apart
// (rank XOR distance) exchanging size/2, size/4, … size/N, then log2 N all-gather phases back up.
void TrafficBuilder::halving_doubling(CollectiveSpec& c, const std::vector<uint32_t>& ranks,
                                      SimTimeNs start) {
  const uint32_t n = c.ranks;
  uint32_t log = 0;
  while ((1u << log) < n) ++log;
  const uint64_t share = ceil_div(c.size_bytes, c.rails);
  c.phases.assign(2 * log, {});
  for (uint32_t k = 0; k < c.rails; ++k) {
    std::vector<uint32_t> into(n, kNoFlow);  // per rank: the flow that reached it in the phase before
    for (uint32_t j = 0; j < 2 * log; ++j) {
      const uint32_t distance = j < log ? n >> (j + 1) : 1u << (j - log);
      const uint64_t bytes = ceil_div(share, uint64_t{1} << (j < log ? j + 1 : 2 * log - j));
      std::vector<uint32_t> next(n);
      for (uint32_t r = 0; r < n; ++r) {
        const uint32_t partner = r ^ distance;
        const uint32_t id = add(topo_.machines[ranks[r]].nics[k], topo_.machines[ranks[partner]].nics[k],
                                bytes, start, into[r]);
        next[partner] = id;
        c.phases[j].push_back(id);
      }
      into = next;
    }
  }
}

// All-to-all: every rank sends size_bytes (split over its rails) to every other rank at once.
void TrafficBuilder::all_to_all(CollectiveSpec& c, const std::vector<uint32_t>& ranks, SimTimeNs start) {
  const uint64_t share = ceil_div(c.size_bytes, c.rails);
  c.phases.assign(1, {});
  for (uint32_t r = 0; r < c.ranks; ++r) {
    for (uint32_t q = 0; q < c.ranks; ++q) {
      if (q == r) continue;
      for (uint32_t k = 0; k < c.rails; ++k) {
        c.phases[0].push_back(
            add(topo_.machines[ranks[r]].nics[k], topo_.machines[ranks[q]].nics[k], share, start));
      }
    }
  }
}

}  // namespace rdmad::sim
