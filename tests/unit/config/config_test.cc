#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "rdmad/config/field.h"
#include "rdmad/config/loader.h"

namespace rdmad::config {
namespace {

namespace fs = std::filesystem;
const fs::path kData = fs::path(RDMAD_SOURCE_DIR) / "tests/data/config";

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string all_errors(const LoadResult& r) {
  std::string s;
  for (const auto& e : r.errors) s += e.to_string() + "\n";
  return s;
}

TEST(Config, DefaultIsValidAndMatchesDocumentedDefaults) {
  const LoadResult r = load_string("", "<empty>");
  ASSERT_TRUE(r.ok()) << all_errors(r);
  const Config& c = r.config;
  EXPECT_EQ(c.daemon.runtime_dir, "/run/rdmad");
  EXPECT_EQ(c.daemon.socket_path, "/run/rdmad/rdmad.sock");
  EXPECT_EQ(c.daemon.log_level, "info");
  EXPECT_EQ(c.metrics.listen, "127.0.0.1:9842");
  EXPECT_EQ(c.cc.profile, "mlx5");
  EXPECT_EQ(c.cc.params, cc::mlx5_profile());
  EXPECT_TRUE(c.nics.empty());
}

TEST(Config, PrintedDefaultConfigRoundTrips) {
  const std::string text = render_default_config();
  const LoadResult r = load_string(text, "<printed>");
  ASSERT_TRUE(r.ok()) << all_errors(r) << text;
  EXPECT_EQ(r.config.daemon.log_level, default_config().daemon.log_level);
  EXPECT_EQ(r.config.metrics.listen, default_config().metrics.listen);
  EXPECT_EQ(r.config.cc.params, default_config().cc.params);
  // Every field of the table appears in the printed file.
  for (const Field& f : fields()) EXPECT_NE(text.find(f.name + " = "), std::string::npos) << f.path();
}

TEST(Config, FullFileSetsEverySection) {
  const LoadResult r = load_file((kData / "valid/full.toml").string());
  ASSERT_TRUE(r.ok()) << all_errors(r);
  const Config& c = r.config;
  EXPECT_EQ(c.daemon.log_level, "debug");
  EXPECT_EQ(c.metrics.listen, "[::1]:9842");
  EXPECT_EQ(c.metrics.labels.at("rack"), "r7");
  cc::DcqcnParams want = cc::paper_profile();
  want.increase_timer_us = 110;
  want.alpha_gain = 4.0 / 1024;
  EXPECT_EQ(c.cc.params, want);
  ASSERT_EQ(c.nics.size(), 2u);
  EXPECT_EQ(c.nics[0].name, "soft0");
  EXPECT_EQ(c.nics[0].udp_port, 0);
  EXPECT_EQ(c.nics[1].backend, "rdma_core");
  EXPECT_EQ(c.nics[1].device, "mlx5_0");
  EXPECT_EQ(c.nics[1].port, 1);
  EXPECT_EQ(c.nics[1].udp_port, 4791);  // per-entry default
}

// Each file under tests/data/config/invalid/ starts with "# expect: LINE KEY MESSAGE-PART" and
// must produce an error at exactly that line and key path, whose message contains MESSAGE-PART.
TEST(Config, EveryInvalidFileNamesLineKeyAndExpectation) {
  int files = 0;
  for (const auto& entry : fs::directory_iterator(kData / "invalid")) {
    const std::string text = read(entry.path());
    const std::string first = text.substr(0, text.find('\n'));
    ASSERT_EQ(first.rfind("# expect: ", 0), 0u) << entry.path();
    std::istringstream ex(first.substr(10));
    uint32_t line = 0;
    std::string key;
    ex >> line >> key;
    std::string part;
    std::getline(ex, part);
    part.erase(0, part.find_first_not_of(' '));
    if (key == "-") key.clear();

    const LoadResult r = load_file(entry.path().string());
    ASSERT_FALSE(r.ok()) << entry.path();
    bool found = false;
    for (const auto& e : r.errors) {
      if (e.line == line && e.key == key && e.message.find(part) != std::string::npos) found = true;
    }
    EXPECT_TRUE(found) << entry.path().filename() << ": wanted line " << line << " key '" << key << "' message '"
                       << part << "', got:\n"
                       << all_errors(r);
    // The rendered message starts with file:line:column.
    EXPECT_EQ(r.errors.front().to_string().rfind(entry.path().string() + ":", 0), 0u);
    ++files;
  }
  EXPECT_GE(files, 15);
}

TEST(Config, CollectsEveryErrorNotJustTheFirst) {
  const LoadResult r = load_string(
      "[daemon]\nlog_level = \"loud\"\nbogus = 1\n[metrics]\nlisten = \"nowhere\"\n[cc]\nrpg_ai_rate = 0\n", "multi.toml");
  ASSERT_EQ(r.errors.size(), 4u) << all_errors(r);
  EXPECT_EQ(r.errors[0].to_string().rfind("multi.toml:2:13: daemon.log_level: invalid value \"loud\"", 0), 0u)
      << r.errors[0].to_string();
  EXPECT_EQ(r.errors[1].line, 3u);
  EXPECT_EQ(r.errors[2].key, "metrics.listen");
  EXPECT_EQ(r.errors[3].key, "cc.rpg_ai_rate");
}

TEST(Config, UnreadableFileIsAnError) {
  const LoadResult r = load_file("/nonexistent/rdmad.toml");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].to_string().find("/nonexistent/rdmad.toml: cannot read file"), std::string::npos);
}

TEST(Config, EnvironmentOverridesLogLevel) {
  Config c = default_config();
  ASSERT_EQ(setenv("RDMAD_LOG_LEVEL", "trace", 1), 0);
  EXPECT_EQ(apply_environment(c), "");
  EXPECT_EQ(c.daemon.log_level, "trace");
  ASSERT_EQ(setenv("RDMAD_LOG_LEVEL", "chatty", 1), 0);
  EXPECT_NE(apply_environment(c).find("RDMAD_LOG_LEVEL"), std::string::npos);
  EXPECT_EQ(c.daemon.log_level, "trace");
  unsetenv("RDMAD_LOG_LEVEL");
}

TEST(Config, ReferenceDocMatchesFieldTable) {
  const fs::path doc = fs::path(RDMAD_SOURCE_DIR) / "docs/configuration.md";
  EXPECT_TRUE(read(doc) == render_markdown())
      << "docs/configuration.md is out of date: regenerate it with `build/daemon/rdmad --print-config-doc > "
         "docs/configuration.md`";
}

}  // namespace
}  // namespace rdmad::config
