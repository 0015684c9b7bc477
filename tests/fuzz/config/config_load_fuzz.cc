// libFuzzer target for the configuration loader: any text, TOML or not, must come back as a
// configuration or as errors that each say what is wrong, never as a crash; and the same text must
// load the same way twice (the loader keeps no state between files).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "rdmad/config/loader.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const rdmad::config::LoadResult r = rdmad::config::load_string(text, "fuzz.toml");
  for (const auto& e : r.errors) {
    check(e.file == "fuzz.toml");
    check(!e.message.empty());
    check(!e.to_string().empty());
  }
  const rdmad::config::LoadResult again = rdmad::config::load_string(text, "fuzz.toml");
  check(again.errors.size() == r.errors.size());
  for (size_t i = 0; i < r.errors.size(); ++i) check(again.errors[i].to_string() == r.errors[i].to_string());
  return 0;
}
