// Inputs are opened once, by descriptor (input_file.hpp): each reader opens each of its files by
// path exactly once and reads or maps that descriptor, a FIFO with no writer is refused without
// blocking, and a lease pins its file open, so a deleted input's inode is never mistaken for a new
// file's.

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "data/file_syscalls.hpp"
#include "expect_throw.hpp"
#include "temp_dir.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/indexed_dataset.hpp"
#include "thdpack/data/input_file.hpp"
#include "thdpack/data/jsonl_dataset.hpp"
#include "thdpack/data/lengths_file.hpp"
#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/data/output_file.hpp"
#include "thdpack/data/pack_file.hpp"

namespace thdpack {
namespace {

using test_util::expect_throw_with;
using test_util::TempDir;

// Counts every open of an input by path while alive (the library's own open is still made).
class OpenCounter {
 public:
  OpenCounter() : saved_(detail::file_syscalls().open_input) {
    opened().clear();
    detail::file_syscalls().open_input = [](const char* path, int flags) {
      ++opened()[std::filesystem::weakly_canonical(path).string()];
      return ::open(path, flags);
    };
  }
  ~OpenCounter() { detail::file_syscalls().open_input = saved_; }
  OpenCounter(const OpenCounter&) = delete;
  OpenCounter& operator=(const OpenCounter&) = delete;

  static std::map<std::string, int>& opened() {
    static std::map<std::string, int> counts;
    return counts;
  }

 private:
  int (*saved_)(const char*, int);
};

std::string canonical(const std::string& path) {
  return std::filesystem::canonical(path).string();
}

void write_indexed(const std::string& prefix) {
  IndexedDatasetWriter writer(prefix, TokenDType::kInt32);
  writer.add_sequence(std::vector<int64_t>{1, 2, 3});
  writer.add_sequence(std::vector<int64_t>{4});
  writer.finish();
}

MockConfig lengths_config(const std::string& path) {
  MockConfig c;
  c.mode = MockConfig::Mode::kFile;
  c.path = path;
  return c;
}

// Every reader of one input file, with the kind its messages give it.
std::vector<std::pair<std::string, std::function<void(const std::string&)>>> readers() {
  return {
      {"JSONL file", [](const std::string& p) { load_jsonl_dataset(p); }},
      {"lengths file", [](const std::string& p) { read_lengths_file(p); }},
      {"lengths file", [](const std::string& p) { make_mock_dataset(lengths_config(p)); }},
      {"pack file", [](const std::string& p) { PackedDataset::open(p); }},
      {"config", [](const std::string& p) { read_input_file(p, "config", kMaxConfigFileBytes); }},
      {"indexed dataset file", [](const std::string& p) { IndexedDataset::open(p); }},
  };
}

// Runs `f` in a child process; the child's exit status, or -1 when it was still running after
// `seconds` (then it is killed).
int run_with_timeout(const std::function<int()>& f, int seconds) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(f());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int status = 0;
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(InputDescriptor, AFifoWithNoWriterIsRefusedWithoutBlocking) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  // Indexed datasets read PREFIX.idx: a FIFO there too.
  ASSERT_EQ(::mkfifo(dir.file("fifo.idx").c_str(), 0600), 0);
  int cases = 0;
  for (const auto& [what, read] : readers()) {
    SCOPED_TRACE(what);
    const int status = run_with_timeout(
        [&dir, read = read] {
          try {
            read(dir.file("fifo"));  // indexed datasets: the prefix, so fifo.idx is read
          } catch (const InvalidArgument& e) {
            return std::string(e.what()).find("' is a FIFO (named pipe), not a regular file") !=
                           std::string::npos
                       ? 0
                       : 2;
          }
          return 3;
        },
        20);
    EXPECT_EQ(status, 0) << "-1: blocked on the FIFO; 2: another message; 3: not refused";
    ++cases;
  }
  EXPECT_EQ(cases, 6);
}

TEST(InputDescriptor, EveryReaderOpensEachOfItsFilesByPathOnce) {
  TempDir dir;
  const std::string jsonl = dir.write("a.jsonl", "{\"input_ids\":[1,2]}\n{\"input_ids\":[3]}\n");
  const std::string lengths = dir.write("l.csv", "seq_len\n5\n7\n");
  const std::string config = dir.write("c.json", "{\"mode\":\"lognormal\"}");
  write_indexed(dir.file("d"));
  Bins packs;
  packs.offsets = {0, 1, 2};
  packs.items = {1, 0};
  write_pack_file(dir.file("p.pack"), packs, 8, 1, {"jsonl", jsonl, 2});
  const std::vector<std::pair<std::function<void()>, std::vector<std::string>>> cases = {
      {[&] { load_jsonl_dataset(jsonl); }, {jsonl}},
      {[&] { read_lengths_file(lengths); }, {lengths}},
      {[&] { make_mock_dataset(lengths_config(lengths)); }, {lengths}},
      {[&] { read_input_file(config, "config", kMaxConfigFileBytes); }, {config}},
      {[&] { IndexedDataset::open(dir.file("d")); }, {dir.file("d.idx"), dir.file("d.bin")}},
      {[&] { PackedDataset::open(dir.file("p.pack")); }, {dir.file("p.pack"), jsonl}},
  };
  for (const auto& [read, files] : cases) {
    const OpenCounter counter;
    read();
    for (const std::string& f : files) {
      SCOPED_TRACE(f);
      EXPECT_EQ(OpenCounter::opened()[canonical(f)], 1);
    }
  }
}

TEST(InputDescriptor, PackingASourceOpensEachOfItsFilesByPathOnceWritingIncluded) {
  // Opening the source, packing it and writing the pack file with the fingerprint of what was
  // read opens each source file by path once; the pack file reads back (its fingerprint matches).
  // Then each source is replaced at its path after it was read and before the pack file is
  // written: the pack file records what was read, so reading it back refuses the changed source.
  TempDir dir;
  const std::string jsonl = dir.write("a.jsonl", "{\"input_ids\":[1,2]}\n{\"input_ids\":[3]}\n");
  write_indexed(dir.file("d"));
  write_indexed(dir.file("e"));
  const std::string blend = "1 " + dir.file("d") + " 1 " + dir.file("e");
  const std::vector<std::pair<PackSource, std::vector<std::string>>> cases = {
      {{"jsonl", jsonl, 2}, {jsonl}},
      {{"indexed", dir.file("d"), 2}, {dir.file("d.idx"), dir.file("d.bin")}},
      {{"indexed", blend, 4},
       {dir.file("d.idx"), dir.file("d.bin"), dir.file("e.idx"), dir.file("e.bin")}},
  };
  Bins packs;
  packs.offsets = {0, 1, 2};
  packs.items = {1, 0};
  const std::string pack = dir.file("p.pack");
  for (const auto& [source, files] : cases) {
    SCOPED_TRACE(source.spec);
    {
      const OpenCounter counter;
      const OpenedPackSource opened = open_pack_source_once(source);
      write_pack_file(pack, packs, 8, 1, source, opened.fingerprint);
      for (const std::string& f : files) {
        SCOPED_TRACE(f);
        EXPECT_EQ(OpenCounter::opened()[canonical(f)], 1);
      }
      EXPECT_EQ(opened.fingerprint, source_fingerprint(source));
    }
    EXPECT_EQ(PackedDataset::open(pack)->num_packs(), 2);
    // The first file replaced (same sample count, other content) after the source was read (and
    // closed: an input in use is never replaced).
    const uint64_t read_fingerprint = open_pack_source_once(source).fingerprint;
    const std::string replaced = files.front();
    const std::string saved = dir.file("saved");
    std::filesystem::copy_file(replaced, saved);
    if (source.kind == "jsonl") {
      dir.write("a.jsonl", "{\"input_ids\":[5,6,7]}\n{\"input_ids\":[8]}\n");
    } else {
      const std::string prefix = replaced.substr(0, replaced.size() - 4);
      IndexedDatasetWriter writer(prefix, TokenDType::kInt32);
      writer.add_sequence(std::vector<int64_t>{1});
      writer.add_sequence(std::vector<int64_t>{2, 3, 4, 5});
      writer.finish();
    }
    write_pack_file(pack, packs, 8, 1, source, read_fingerprint);
    expect_throw_with<InvalidArgument>([&] { PackedDataset::open(pack); },
                                       {"changed since it was packed"});
    std::filesystem::rename(saved, replaced);
    if (source.kind == "indexed") {
      const std::string prefix = replaced.substr(0, replaced.size() - 4);
      write_indexed(prefix);
    }
    EXPECT_EQ(PackedDataset::open(pack)->num_packs(), 2);
  }
}

TEST(InputDescriptor, WhatIsReadIsTheFileOpenedNotWhatIsNowAtThePath) {
  TempDir dir;
  const std::string path = dir.write("in.txt", "first\nsecond\n");
  const InputFile file(path, "input");
  // Another file renamed over the path, and the first one deleted: the descriptor still reads it.
  dir.write("other.txt", "replaced\n");
  std::filesystem::rename(dir.file("other.txt"), path);
  EXPECT_EQ(file.read_all(100), "first\nsecond\n");
  EXPECT_EQ(file.size(), 13);
  InputStream in(file);
  std::string line;
  ASSERT_TRUE(read_bounded_line(in, line, 100, "in.txt:1"));
  EXPECT_EQ(line, "first");
  // Two streams over one descriptor each read from the start.
  InputStream again(file);
  ASSERT_TRUE(read_bounded_line(again, line, 100, "in.txt:1"));
  EXPECT_EQ(line, "first");
  ASSERT_TRUE(read_bounded_line(in, line, 100, "in.txt:2"));
  EXPECT_EQ(line, "second");
  EXPECT_FALSE(read_bounded_line(in, line, 100, "in.txt:3"));
  expect_throw_with<InvalidArgument>([&] { file.read_all(12); },
                                     {"input '" + path + "' has 13 bytes; the limit is 12"});
}

// Whether this process holds `path` open although it was deleted.
bool held_open_deleted(const std::string& path) {
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(fd.path(), ec).string() == path + " (deleted)") return true;
  }
  return false;
}

TEST(InputDescriptor, ALeasePinsItsFileSoADeletedInputIsNeverAnotherFile) {
  if (!std::filesystem::exists("/proc/self/fd")) GTEST_SKIP() << "no /proc/self/fd";
  TempDir dir;
  const std::string jsonl = dir.write("a.jsonl", "{\"input_ids\":[1,2]}\n{\"input_ids\":[3]}\n");
  const std::string lengths = dir.write("l.csv", "5\n7\n");
  write_indexed(dir.file("d"));
  Bins packs;
  packs.offsets = {0, 1, 2};
  packs.items = {1, 0};
  write_pack_file(dir.file("p.pack"), packs, 8, 1, {"jsonl", jsonl, 2});
  // A dataset of each kind; its file deleted while the dataset is open.
  const std::vector<std::pair<std::string, std::function<std::shared_ptr<const void>()>>> leases = {
      {jsonl, [&] { return std::shared_ptr<const void>(load_jsonl_dataset(jsonl)); }},
      {lengths,
       [&] { return std::shared_ptr<const void>(make_mock_dataset(lengths_config(lengths))); }},
      {dir.file("d.idx"),
       [&] { return std::shared_ptr<const void>(IndexedDataset::open(dir.file("d"))); }},
      {dir.file("p.pack"),
       [&] { return std::shared_ptr<const void>(PackedDataset::open(dir.file("p.pack"))); }},
  };
  for (const auto& [path, open] : leases) {
    SCOPED_TRACE(path);
    const std::string kept = dir.file("kept");
    std::filesystem::copy_file(path, kept, std::filesystem::copy_options::overwrite_existing);
    {
      const auto dataset = open();
      EXPECT_EQ(leased_input_at(path), path);
      std::filesystem::remove(path);
      EXPECT_TRUE(held_open_deleted(canonical(dir.path().string()) + "/" +
                                    std::filesystem::path(path).filename().string()));
      // New files, at the same path and beside it, are never the leased input: its inode is held.
      for (int i = 0; i < 20; ++i) {
        const std::string fresh = dir.write("fresh" + std::to_string(i), "x");
        EXPECT_EQ(leased_input_at(fresh), "");
      }
      {
        OutputFile out(path);
        out.write("new", 3);
        out.commit();
      }
      EXPECT_EQ(leased_input_at(path), "");
    }
    EXPECT_FALSE(held_open_deleted(canonical(dir.path().string()) + "/" +
                                   std::filesystem::path(path).filename().string()));
    std::filesystem::rename(kept, path);
    for (int i = 0; i < 20; ++i) std::filesystem::remove(dir.file("fresh" + std::to_string(i)));
  }
}

}  // namespace
}  // namespace thdpack
