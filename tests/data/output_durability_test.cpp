// Outputs reach the disk before they replace anything (output_file.hpp): commit() syncs the
// temporary file, then renames it, then syncs the folder; a sync or a rename that fails leaves
// the old file intact and no temporary file behind.

#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "data/file_syscalls.hpp"
#include "expect_throw.hpp"
#include "megatron_index.hpp"
#include "temp_dir.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/indexed_dataset.hpp"
#include "thdpack/data/output_file.hpp"

namespace thdpack {
namespace {

using test_util::expect_throw_with;
using test_util::TempDir;
using testing::read_bytes;

// While alive, records each fsync and rename of the library ("fsync PATH", "rename FROM") and
// makes the `fail_at`-th of them (counted from 0; -1: none) fail with EIO.
class SyscallRecorder {
 public:
  explicit SyscallRecorder(int fail_at = -1) : saved_(detail::file_syscalls()) {
    events().clear();
    failing() = fail_at;
    detail::file_syscalls().fsync = [](int fd) {
      std::error_code ec;
      const auto target = std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(fd), ec);
      return record("fsync " + target.string(), [fd] { return ::fsync(fd); });
    };
    detail::file_syscalls().rename = [](const char* from, const char* to) {
      return record(std::string("rename ") + from, [from, to] { return std::rename(from, to); });
    };
  }
  ~SyscallRecorder() { detail::file_syscalls() = saved_; }
  SyscallRecorder(const SyscallRecorder&) = delete;
  SyscallRecorder& operator=(const SyscallRecorder&) = delete;

  static std::vector<std::string>& events() {
    static std::vector<std::string> list;
    return list;
  }

 private:
  static int& failing() {
    static int at = -1;
    return at;
  }
  static int record(const std::string& event, const std::function<int()>& call) {
    events().push_back(event);
    if (static_cast<int>(events().size()) - 1 == failing()) {
      errno = EIO;
      return -1;
    }
    return call();
  }

  detail::FileSyscalls saved_;
};

std::vector<std::string> names_in(const TempDir& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(OutputDurability, CommitSyncsTheFileThenRenamesThenSyncsTheFolder) {
  TempDir dir;
  const std::string path = dir.write("out.bin", "old");
  const std::string folder = std::filesystem::canonical(dir.path()).string();
  {
    const SyscallRecorder recorder;
    OutputFile out(path);
    out.write("new", 3);
    out.commit();
    const auto& e = SyscallRecorder::events();
    ASSERT_EQ(e.size(), 3u);
    EXPECT_EQ(e[0].rfind("fsync " + folder + "/.out.bin.tmp.", 0), 0u) << e[0];
    EXPECT_EQ(e[1].rfind("rename ", 0), 0u) << e[1];
    EXPECT_NE(e[1].find("/.out.bin.tmp."), std::string::npos) << e[1];
    EXPECT_EQ(e[2], "fsync " + folder);
  }
  EXPECT_EQ(read_bytes(path), "new");
}

TEST(OutputDurability, AFailedSyncOrRenameLeavesTheOldFileAndNoTemporary) {
  TempDir dir;
  const std::string path = dir.write("out.bin", "old");
  const std::vector<std::string> before = names_in(dir);
  // The file's sync (0) and the rename (1): refused, the old file stays.
  for (int fail_at : {0, 1}) {
    SCOPED_TRACE(fail_at);
    {
      const SyscallRecorder recorder(fail_at);
      OutputFile out(path);
      out.write("new", 3);
      expect_throw_with<InvalidArgument>([&] { out.commit(); },
                                         {"'" + std::filesystem::canonical(path).string() + "'",
                                          std::strerror(EIO)});
    }
    EXPECT_EQ(read_bytes(path), "old");
    EXPECT_EQ(names_in(dir), before);
  }
  // The folder's sync (2): the new file is in place, and the error says it may not be durable.
  {
    const SyscallRecorder recorder(2);
    OutputFile out(path);
    out.write("new", 3);
    expect_throw_with<InvalidArgument>([&] { out.commit(); },
                                       {"is in place but its folder could not be synced"});
  }
  EXPECT_EQ(read_bytes(path), "new");
  EXPECT_EQ(names_in(dir), before);
}

TEST(OutputDurability, AnIndexedDatasetWriterThatCannotSyncLeavesBothOldFiles) {
  TempDir dir;
  {
    IndexedDatasetWriter writer(dir.file("d"), TokenDType::kInt32);
    writer.add_sequence(std::vector<int64_t>{1, 2});
    writer.finish();
  }
  const std::string bin = read_bytes(dir.file("d.bin"));
  const std::string idx = read_bytes(dir.file("d.idx"));
  const std::vector<std::string> before = names_in(dir);
  int failures = 0;
  // Each of the writer's syncs and renames in turn fails; until both files are renamed, neither
  // old file changes.
  for (int fail_at = 0;; ++fail_at) {
    SCOPED_TRACE(fail_at);
    size_t calls = 0;
    bool threw = false;
    {
      const SyscallRecorder recorder(fail_at);
      try {
        IndexedDatasetWriter writer(dir.file("d"), TokenDType::kInt32);
        writer.add_sequence(std::vector<int64_t>{7, 8, 9});
        writer.finish();
      } catch (const InvalidArgument&) {
        threw = true;
      }
      calls = SyscallRecorder::events().size();
    }
    if (static_cast<size_t>(fail_at) >= calls) {
      EXPECT_FALSE(threw);
      break;
    }
    EXPECT_TRUE(threw);
    ++failures;
    const bool renamed_any = read_bytes(dir.file("d.bin")) != bin;
    if (!renamed_any) {
      EXPECT_EQ(read_bytes(dir.file("d.idx")), idx);
    }
    EXPECT_EQ(names_in(dir), before);
    // Back to the old dataset for the next round.
    {
      IndexedDatasetWriter writer(dir.file("d"), TokenDType::kInt32);
      writer.add_sequence(std::vector<int64_t>{1, 2});
      writer.finish();
    }
  }
  EXPECT_GE(failures, 4);  // two file syncs and two renames at least
}

}  // namespace
}  // namespace thdpack
