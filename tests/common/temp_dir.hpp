#pragma once
// TempDir: a fresh directory under the system temp dir for one test, removed with everything in it
// at the end; write() puts a file there and returns its path.

#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace thdpack::test_util {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "thdpack_test_" + std::to_string(::getpid()) + "_" +
                       std::to_string(counter++) + "_" + (info ? info->name() : "x");
    // Parameterized test names hold '/': keep the directory one level deep.
    for (char& ch : name) {
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    }
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  /// The path of `name` in the directory (nothing is created).
  std::string file(const std::string& name) const { return (path_ / name).string(); }

  std::string write(const std::string& name, const std::string& content) const {
    const std::filesystem::path file = path_ / name;
    std::ofstream out(file, std::ios::binary);
    out << content;
    return file.string();
  }

 private:
  std::filesystem::path path_;
};

}  // namespace thdpack::test_util
