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
// makes the `fail_at`-th of them (counted from 0; -1: none) fail with EIO, and also each one
// from `fail_also` on (to fail a step and then the undoing of it).
class SyscallRecorder {
 public:
  explicit SyscallRecorder(int fail_at = -1, int fail_also = -1)
      : saved_(detail::file_syscalls()) {
    events().clear();
    failing() = fail_at;
    failing_also() = fail_also;
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
  static int& failing_also() {
    static int from = -1;
    return from;
  }
  static int record(const std::string& event, const std::function<int()>& call) {
    events().push_back(event);
    const int index = static_cast<int>(events().size()) - 1;
    if (index == failing() || (failing_also() >= 0 && index >= failing_also())) {
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

// The tokens of the dataset at `prefix`, read back through the reader; empty when there is none.
std::vector<std::vector<int64_t>> tokens_at(const std::string& prefix) {
  std::vector<std::vector<int64_t>> out;
  if (!std::filesystem::exists(prefix + ".bin") && !std::filesystem::exists(prefix + ".idx")) {
    return out;
  }
  const auto dataset = IndexedDataset::open(prefix);
  for (int64_t i = 0; i < dataset->size(); ++i) out.push_back(dataset->sample(i).input_ids);
  return out;
}

// Sequences of `count` sequences whose lengths and tokens depend on `seed`.
std::vector<std::vector<int64_t>> sequences(int count, int seed) {
  std::vector<std::vector<int64_t>> out;
  for (int i = 0; i < count; ++i) {
    out.emplace_back(static_cast<size_t>(1 + (seed * 7 + i * 3) % 11), seed * 100 + i);
  }
  return out;
}

void write_dataset(const std::string& prefix, const std::vector<std::vector<int64_t>>& seqs) {
  IndexedDatasetWriter writer(prefix, TokenDType::kInt32);
  for (const auto& s : seqs) writer.add_sequence(s);
  writer.finish();
}

TEST(OutputDurability, AnIndexedDatasetWriterThatFailsLeavesTheOldPairOrTheNewOne) {
  // Each of the writer's syncs and renames in turn fails (and, in a second pass, every call from
  // it on too, so that the undoing fails as well), over old datasets of several sizes and none:
  // the files then hold the old dataset or the new one, never a .bin of one beside the .idx of the
  // other, and no temporary or backup file is left; a failed undo says so naming both files.
  int failures = 0;
  for (int seed = 0; seed < 6; ++seed) {
    for (bool fail_undo : {false, true}) {
      TempDir dir;
      const std::string prefix = dir.file("d");
      const bool had_old = seed % 3 != 0;
      const auto old_seqs = had_old ? sequences(1 + seed, seed) : decltype(sequences(0, 0)){};
      const auto new_seqs = sequences(2 + (seed * 5) % 7, seed + 50);
      if (had_old) write_dataset(prefix, old_seqs);
      const std::vector<std::string> before = names_in(dir);
      for (int fail_at = 0;; ++fail_at) {
        SCOPED_TRACE("seed " + std::to_string(seed) + " undo fails " +
                     std::to_string(fail_undo) + " fail_at " + std::to_string(fail_at));
        size_t calls = 0;
        std::string error;
        {
          const SyscallRecorder recorder(fail_at, fail_undo ? fail_at : -1);
          try {
            write_dataset(prefix, new_seqs);
          } catch (const InvalidArgument& e) {
            error = e.what();
          }
          calls = SyscallRecorder::events().size();
        }
        if (static_cast<size_t>(fail_at) >= calls) {
          EXPECT_EQ(error, "");
          EXPECT_EQ(tokens_at(prefix), new_seqs);
          break;
        }
        ASSERT_NE(error, "");
        ++failures;
        if (error.find("do not belong together") != std::string::npos) {
          // Only when undoing failed too: both files and the kept old one are named.
          EXPECT_TRUE(fail_undo) << error;
          EXPECT_NE(error.find(prefix + ".bin'"), std::string::npos) << error;
          EXPECT_NE(error.find(prefix + ".idx'"), std::string::npos) << error;
          if (had_old) {
            EXPECT_NE(error.find("/.d.bin.old."), std::string::npos) << error;
          }
        } else {
          const auto now = tokens_at(prefix);
          EXPECT_TRUE(now == old_seqs || now == new_seqs) << error;
          if (now == new_seqs) {
            EXPECT_NE(error.find("may not survive a crash"), std::string::npos) << error;
          }
          const std::vector<std::string> expected =
              before.empty() && now == new_seqs ? std::vector<std::string>{"d.bin", "d.idx"}
                                                : before;
          EXPECT_EQ(names_in(dir), expected);
        }
        // Back to the old state for the next round.
        for (const auto& name : names_in(dir)) std::filesystem::remove(dir.file(name));
        if (had_old) write_dataset(prefix, old_seqs);
      }
    }
  }
  EXPECT_GE(failures, 12 * 6);  // two file syncs, two renames and two folder syncs each
}

}  // namespace
}  // namespace thdpack
