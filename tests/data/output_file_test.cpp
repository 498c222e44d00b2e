// Never destroying an input (output_file.hpp, input_file.hpp): every writer of the library refuses
// an output that is an input in use, under every name the file has, before writing anything, and
// what is at an output path stays intact until the new file is complete.

#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "expect_throw.hpp"
#include "megatron_index.hpp"
#include "temp_dir.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/indexed_dataset.hpp"
#include "thdpack/data/input_file.hpp"
#include "thdpack/data/jsonl_dataset.hpp"
#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/data/output_file.hpp"
#include "thdpack/data/pack_file.hpp"

namespace {
std::atomic<int> umask_calls{0};
}  // namespace

// Every umask() call of this program (the library's included) comes here and is counted.
extern "C" mode_t umask(mode_t mask) noexcept {
  ++umask_calls;
  return static_cast<mode_t>(::syscall(SYS_umask, mask));
}

namespace thdpack {
namespace {

using test_util::expect_throw_with;
using test_util::TempDir;
using testing::read_bytes;

/// No temporary file is left in `dir`.
void expect_no_temporaries(const TempDir& dir) {
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  }
}

Bins two_packs() {
  Bins packs;
  packs.offsets = {0, 1, 2};
  packs.items = {1, 0};
  return packs;
}

void write_indexed(const std::string& prefix, int sequences) {
  IndexedDatasetWriter writer(prefix, TokenDType::kInt32);
  for (int i = 0; i < sequences; ++i) writer.add_sequence(std::vector<int64_t>(3, i + 1));
  writer.finish();
}

// Every writer of the library, writing the file `path` (prefix writers: PATH minus ".bin").
std::vector<std::pair<std::string, std::function<void(const std::string&)>>> writers(
    const std::string& jsonl_source) {
  return {
      {"OutputFile",
       [](const std::string& path) {
         OutputFile out(path);
         out.write("x", 1);
         out.commit();
       }},
      {"write_pack_file",
       [jsonl_source](const std::string& path) {
         write_pack_file(path, two_packs(), 8, 1, {"jsonl", jsonl_source, 2});
       }},
      {"IndexedDatasetWriter",
       [](const std::string& path) { write_indexed(path.substr(0, path.size() - 4), 2); }},
  };
}

TEST(OutputFile, CommitReplacesAndAbandonLeavesTheOldFile) {
  TempDir dir;
  const std::string path = dir.write("out.bin", "old");
  {
    OutputFile out(path);
    out.write("new", 3);
    EXPECT_EQ(read_bytes(path), "old");  // nothing changes before commit
  }
  EXPECT_EQ(read_bytes(path), "old");
  expect_no_temporaries(dir);
  {
    OutputFile out(path);
    out.write("new!", 4);
    out.commit();
  }
  EXPECT_EQ(read_bytes(path), "new!");
  expect_no_temporaries(dir);
  // A writer that throws halfway leaves the old file (an index out of the source: refused before).
  write_indexed(dir.file("ds"), 2);
  const std::string bin = read_bytes(dir.file("ds.bin"));
  {
    IndexedDatasetWriter writer(dir.file("ds"), TokenDType::kUint8);
    writer.add_sequence(std::vector<int64_t>{1, 2});
    EXPECT_THROW(writer.add_sequence(std::vector<int64_t>{300}), InvalidArgument);
  }
  EXPECT_EQ(read_bytes(dir.file("ds.bin")), bin);
  expect_no_temporaries(dir);
}

TEST(OutputFile, NewFilesGetTheUsualPermissionsAndExistingOnesKeepTheirs) {
  TempDir dir;
  const mode_t mask = ::umask(022);
  {
    OutputFile out(dir.file("fresh"));
    out.commit();
  }
  struct stat st {};
  ASSERT_EQ(::stat(dir.file("fresh").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  ::chmod(dir.file("fresh").c_str(), 0600);
  {
    OutputFile out(dir.file("fresh"));
    out.commit();
  }
  ASSERT_EQ(::stat(dir.file("fresh").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ::umask(mask);
}

// Creating an output never calls umask() (reading the umask that way sets it for an instant, when
// another thread creating a file would get the wrong permissions): umask_calls counts the calls
// through the umask below, which stands in for the C library's in this test program.
TEST(OutputFile, CreatingOutputsLeavesTheProcessUmaskAlone) {
  TempDir dir;
  if (!std::filesystem::exists("/proc/self/status")) GTEST_SKIP() << "no /proc/self/status";
  const mode_t mask = ::umask(022);
  const int before = umask_calls.load();
  {
    OutputFile out(dir.file("fresh"));
    out.commit();
  }
  EXPECT_EQ(umask_calls.load(), before);
  struct stat st {};
  ASSERT_EQ(::stat(dir.file("fresh").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  ::umask(mask);
}

TEST(OutputFile, ASymbolicLinkToAnOutputStaysALink) {
  TempDir dir;
  const std::string target = dir.write("target", "old");
  std::filesystem::create_symlink(target, dir.file("link"));
  OutputFile out(dir.file("link"));
  out.write("new", 3);
  out.commit();
  EXPECT_TRUE(std::filesystem::is_symlink(dir.file("link")));
  EXPECT_EQ(read_bytes(target), "new");
}

TEST(OutputFile, AnExistingNonRegularOutputIsRefused) {
  TempDir dir;
  std::filesystem::create_directory(dir.file("folder"));
  expect_throw_with<InvalidArgument>([&] { OutputFile out(dir.file("folder")); },
                                     {"output '" + dir.file("folder") +
                                      "' exists and is not a "
                                      "regular file"});
  expect_throw_with<InvalidArgument>([&] { OutputFile out("/dev/null"); },
                                     {"output '/dev/null' exists and is not a regular file"});
  expect_throw_with<InvalidArgument>([&] { OutputFile out(dir.file("no/such/folder/x")); },
                                     {"cannot create '" + dir.file("no/such/folder/x") + "'"});
}

// The class of cases: every writer x every input kind x every name of the input file. Each is
// refused before anything is written, and every input stays byte-identical.
TEST(OutputFile, EveryWriterRefusesEveryNameOfAnInputInUse) {
  TempDir dir;
  std::filesystem::create_directory(dir.file("sub"));
  const std::string jsonl = dir.write("j.bin", "{\"input_ids\":[1,2]}\n{\"input_ids\":[3]}\n");
  const std::string lengths = dir.write("l.bin", "4\n2\n");
  write_indexed(dir.file("d"), 3);
  const std::string pack_file = dir.file("p.bin");
  write_pack_file(pack_file, two_packs(), 8, 1, {"jsonl", jsonl, 2});
  const std::vector<std::string> every_input = {jsonl, lengths, dir.file("d.bin"),
                                                dir.file("d.idx"), pack_file};
  std::vector<std::string> before;
  for (const auto& p : every_input) before.push_back(read_bytes(p));

  const auto jsonl_dataset = load_jsonl_dataset(jsonl);
  MockConfig file_mode;
  file_mode.mode = MockConfig::Mode::kFile;
  file_mode.path = lengths;
  const auto lengths_dataset = make_mock_dataset(file_mode);
  const auto indexed = IndexedDataset::open(dir.file("d"));
  const auto packed = PackedDataset::open(pack_file);

  int refused = 0, links = 0;
  for (const std::string& input : every_input) {
    const std::string name = std::filesystem::path(input).filename().string();
    const std::string ext = name.substr(name.size() - 4);
    const std::string symlink = dir.file("sym" + std::to_string(links) + ext);
    const std::string hardlink = dir.file("hard" + std::to_string(links++) + ext);
    std::filesystem::create_symlink(input, symlink);
    std::filesystem::create_hard_link(input, hardlink);
    for (const std::string& alias :
         {input, dir.file("sub/../" + name), dir.file("./sub/.././" + name), symlink, hardlink}) {
      for (const auto& [writer, write] : writers(jsonl)) {
        SCOPED_TRACE(writer + " onto " + alias);
        const std::string message = expect_throw_with<InvalidArgument>(
            [&] { write(alias); }, {"is the same file as the input '"});
        for (size_t i = 0; i < every_input.size(); ++i) {
          EXPECT_EQ(read_bytes(every_input[i]), before[i]) << every_input[i];
        }
        expect_no_temporaries(dir);
        ++refused;
      }
    }
  }
  // An indexed writer is refused when only its companion .idx is an input.
  expect_throw_with<InvalidArgument>(
      [&] { write_indexed(dir.file("sub/../d"), 1); },
      {"output '" + dir.file("sub/../d") + ".bin' is the same file as the input"});
  EXPECT_EQ(refused, 5 * 5 * 3);
  EXPECT_EQ(read_bytes(dir.file("d.idx")), before[3]);
}

TEST(OutputFile, AnInputNoLongerInUseCanBeReplaced) {
  TempDir dir;
  const std::string jsonl = dir.write("j.jsonl", "{\"input_ids\":[1,2]}\n{\"input_ids\":[3]}\n");
  write_indexed(dir.file("d"), 2);
  {
    const auto d = IndexedDataset::open(dir.file("d"));
    const auto j = load_jsonl_dataset(jsonl);
    EXPECT_THROW(write_indexed(dir.file("d"), 3), InvalidArgument);
    EXPECT_THROW(write_pack_file(jsonl, two_packs(), 8, 1, {"jsonl", jsonl, 2}), InvalidArgument);
  }
  write_indexed(dir.file("d"), 3);  // the datasets are closed: their files are outputs like others
  EXPECT_EQ(IndexedDataset::open(dir.file("d"))->size(), 3);
  write_pack_file(dir.file("packs"), two_packs(), 8, 1, {"jsonl", jsonl, 2});
  EXPECT_EQ(leased_input_at(jsonl), "");
  EXPECT_EQ(PackedDataset::open(dir.file("packs"))->num_packs(), 2);
}

TEST(IndexedDatasetWriter, NothingIsAddedAfterFinish) {
  TempDir dir;
  IndexedDatasetWriter writer(dir.file("d"), TokenDType::kInt32);
  writer.add_sequence(std::vector<int64_t>{1});
  writer.finish();
  expect_throw_with<InvalidArgument>([&] { writer.finish(); }, {"finish after finish()"});
  expect_throw_with<InvalidArgument>([&] { writer.add_sequence(std::vector<int64_t>{2}); },
                                     {"after finish()"});
  expect_throw_with<InvalidArgument>([&] { writer.add_length_only(4); }, {"after finish()"});
  EXPECT_EQ(IndexedDataset::open(dir.file("d"))->size(), 1);
}

}  // namespace
}  // namespace thdpack
