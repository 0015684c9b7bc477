#pragma once
// Shared by the fuzz targets' seed-corpus generators: their one argument (the corpus directory)
// and writing one seed file.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace rdmad::fuzz {

/// The DIR of `generator DIR`; prints the usage and exits with 2 otherwise.
inline std::string corpus_dir_from_args(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    std::exit(2);
  }
  return argv[1];
}

/// Writes DIR/NAME; exits with 1 if it cannot.
inline void write_seed(const std::string& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = dir + "/" + name;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
}

}  // namespace rdmad::fuzz
