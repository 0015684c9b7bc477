#pragma once
// Writes a run's results into a directory: summary.json, fct.csv, rates.csv, queues.csv, the
// per-port series (utilization.csv, pauses.csv), the topology sketch's layout (topology_nodes.csv,
// topology_links.csv), and with `plot` PNG charts drawn by gnuplot (rates, queues, fct_slowdown,
// utilization, pauses, topology).
#include <filesystem>
#include <string>

#include "rdmad/base/status.h"
#include "rdmad/sim/results.h"

namespace rdmad::sim {

// summary.json as a string (fixed key order and number formatting, so equal results give equal bytes).
std::string summary_json(const RunResults& r);
// Writes every output file; throws std::runtime_error if the directory or a file cannot be written.
void write_outputs(const RunResults& r, const std::filesystem::path& dir);
// Runs gnuplot on the CSVs in `dir`; an error (with gnuplot's output) when it failed.
base::Status plot_outputs(const std::filesystem::path& dir);

}  // namespace rdmad::sim
