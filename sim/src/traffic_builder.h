#pragma once
// Builds a scenario's Traffic source by source (traffic.cc: the single [traffic] source, flows,
// lists, incasts, Poisson; traffic_collectives.cc: AllReduce and all-to-all). Each source first
// resolves its names against the topology; in check mode it stops there.
#include <string>
#include <unordered_map>
#include <vector>

#include "rdmad/sim/rng.h"
#include "rdmad/sim/traffic.h"

namespace rdmad::sim {

class TrafficBuilder {
 public:
  TrafficBuilder(const Scenario& s, const Topology& topo, bool check_only);
  Traffic build();

 private:
  // traffic.cc
  void legacy();
  // Among `nics` (`into` empty), or from `nics` into the NICs of `into` at `load` of their links.
  void poisson(Rng& rng, const std::vector<uint32_t>& nics, double load,
               const std::filesystem::path& cdf_path, uint32_t count, double start_us,
               const std::vector<uint32_t>& into = {});
  void source(const TrafficSource& src, size_t index);
  void flows(const TrafficSource& src);
  void list(const TrafficSource& src);
  void incast(const TrafficSource& src);
  // Names, ranges expanded, "all" as `all`.
  std::vector<std::string> expand(const std::vector<std::string>& names, const Located& loc,
                                  const std::string& key, const std::vector<std::string>& all) const;
  // Names: NICs ("host3", "host3.nic1", ranges, "all") and hosts (multi-NIC hosts by their name).
  std::vector<uint32_t> nics(const std::vector<std::string>& names, const Located& loc,
                             const std::string& key) const;
  std::vector<uint32_t> hosts(const std::vector<std::string>& names, const Located& loc,
                              const std::string& key) const;
  void require_path(uint32_t src, uint32_t dst) const;
  uint32_t add(uint32_t src, uint32_t dst, uint64_t size_bytes, SimTimeNs start_ns, uint32_t after = kNoFlow);
  // traffic_collectives.cc
  void collective(const TrafficSource& src);
  void ring(CollectiveSpec& c, const std::vector<uint32_t>& ranks, SimTimeNs start);
  void halving_doubling(CollectiveSpec& c, const std::vector<uint32_t>& ranks, SimTimeNs start);
  void all_to_all(CollectiveSpec& c, const std::vector<uint32_t>& ranks, SimTimeNs start);

  const Scenario& s_;
  const Topology& topo_;
  const bool check_only_;
  std::unordered_map<std::string, uint32_t> nic_by_name_;
  std::unordered_map<std::string, uint32_t> host_by_name_;
  std::vector<uint32_t> component_;  // per node: its connected part of the topology
  std::string where_ = "traffic";    // the source being built, for errors
  std::vector<FlowSpec> flows_;      // in generation order
  std::vector<uint32_t> after_;
  bool any_after_ = false;
  std::vector<CollectiveSpec> collectives_;
  std::vector<uint32_t> incast_flows_;
  bool windows_ = false;      // some flows take part in Jain's windows
  bool window_all_ = false;   // all of them (the single [traffic] source)
  bool mark_window_ = false;  // the flows being added do
  std::vector<uint8_t> window_flows_;
};

SimTimeNs us_to_ns(double us);

}  // namespace rdmad::sim
