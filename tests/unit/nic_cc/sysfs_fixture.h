#pragma once
// Fixture trees under tests/data/sysfs/ (see its README) and writable copies of them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace rdmad::testing {

inline std::filesystem::path sysfs_fixture(const std::string& name) {
  return std::filesystem::path(RDMAD_SOURCE_DIR) / "tests/data/sysfs" / name;
}

// A private copy of a fixture (symlinks kept as symlinks) for tests that write; removed on destruction.
class WritableFixture {
 public:
  explicit WritableFixture(const std::string& name) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("rdmad-sysfs-" + std::to_string(::getpid()) + "-" + info->test_suite_name() + "-" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::copy(
        sysfs_fixture(name), dir_,
        std::filesystem::copy_options::recursive | std::filesystem::copy_options::copy_symlinks);
  }
  ~WritableFixture() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  WritableFixture(const WritableFixture&) = delete;
  WritableFixture& operator=(const WritableFixture&) = delete;
  const std::filesystem::path& path() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

}  // namespace rdmad::testing
