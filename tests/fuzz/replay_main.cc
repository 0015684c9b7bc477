// Replays a libFuzzer corpus through LLVMFuzzerTestOneInput without libFuzzer, so every committed
// corpus file (and every crash reproducer added to it) runs as an ordinary test under g++ and the
// sanitizers. Usage: <binary> DIR_OR_FILE...
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {
int run_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", p.c_str());
    return 1;
  }
  std::vector<uint8_t> buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(buf.data(), buf.size());
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  size_t files = 0;
  int rc = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path root(argv[i]);
    if (std::filesystem::is_directory(root)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
        if (e.is_regular_file()) {
          rc |= run_file(e.path());
          ++files;
        }
      }
    } else {
      rc |= run_file(root);
      ++files;
    }
  }
  if (files == 0) {
    std::fprintf(stderr, "no corpus files found\n");
    return 1;
  }
  std::printf("replayed %zu corpus files\n", files);
  return rc;
}
