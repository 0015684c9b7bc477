#pragma once
// `rdmad-sim tune ...` (argv[0] is "tune"): the tuning advisor's command line.
#include <filesystem>
#include <functional>
#include <string>

namespace rdmad::sim {

// `resolve` finds a scenario by path or shipped name, as `rdmad-sim SCENARIO` does.
int tune_main(int argc, char** argv, const std::function<std::filesystem::path(const std::string&)>& resolve);

}  // namespace rdmad::sim
