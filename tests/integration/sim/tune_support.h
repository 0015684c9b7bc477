#pragma once
// What the advisor's integration tests share: a tiny scenario (a 4:1 incast on a star, a few
// milliseconds of CPU a run) and reading back what `rdmad-sim tune` wrote.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace rdmad::test {

inline std::string tiny_scenario(const TempDir& dir) {
  return dir.write("tiny.toml",
                   "name = \"tiny\"\n[sim]\nseed = 1\nduration_ms = 3\n[topology]\nkind = \"star\"\nsenders = 4\n"
                   "[switch]\nkmin_bytes = 20000\nkmax_bytes = 200000\npmax = 0.2\n"
                   "[traffic]\nkind = \"incast\"\nsize_bytes = 200000\nbursts = 2\nburst_interval_us = 1000\n"
                   "[output]\nmax_rate_flows = 0\n");
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace rdmad::test
