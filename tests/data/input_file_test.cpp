// Non-regular and unbounded inputs (input_file.hpp): every reader of the library refuses what is
// not a regular file, naming it, before reading (a FIFO never blocks, /dev/zero is never read);
// lines and config files are bounded; a mapped file that shrinks is an error, not a SIGBUS.

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <sstream>
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
#include "thdpack/data/lengths_file.hpp"
#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/data/pack_file.hpp"

namespace thdpack {
namespace {

using test_util::expect_throw_with;
using test_util::TempDir;

// A bound Unix socket at `path` (closed by the destructor).
class Socket {
 public:
  explicit Socket(const std::string& path) : fd_(::socket(AF_UNIX, SOCK_STREAM, 0)) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    path.copy(address.sun_path, sizeof(address.sun_path) - 1);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  }
  ~Socket() { ::close(fd_); }

 private:
  int fd_;
};

TEST(InputFile, EveryReaderRefusesWhatIsNotARegularFile) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);  // no writer: opening it would block
  std::filesystem::create_directory(dir.file("folder"));
  const Socket socket(dir.file("sock"));
  const std::vector<std::pair<std::string, std::string>> specials = {
      {dir.file("fifo"), "a FIFO (named pipe)"},
      {"/dev/zero", "a character device"},
      {dir.file("folder"), "a directory"},
      {dir.file("sock"), "a socket"}};
  // A good indexed dataset whose .idx or .bin is replaced by a link to the special file.
  {
    IndexedDatasetWriter writer(dir.file("good"), TokenDType::kInt32);
    writer.add_sequence(std::vector<int64_t>{1, 2});
    writer.finish();
  }
  const std::vector<std::pair<std::string, std::function<void(const std::string&)>>> readers = {
      {"JSONL file", [](const std::string& p) { load_jsonl_dataset(p); }},
      {"lengths file", [](const std::string& p) { read_lengths_file(p); }},
      {"lengths file",
       [](const std::string& p) {
         MockConfig c;
         c.mode = MockConfig::Mode::kFile;
         c.path = p;
         make_mock_dataset(c);
       }},
      {"pack file", [](const std::string& p) { PackedDataset::open(p); }},
      {"config", [](const std::string& p) { read_input_file(p, "config", kMaxConfigFileBytes); }},
      {"indexed dataset file",
       [&dir](const std::string& p) {
         const std::string prefix = dir.file("as_idx");
         std::filesystem::remove(prefix + ".idx");
         std::filesystem::remove(prefix + ".bin");
         std::filesystem::create_symlink(p, prefix + ".idx");
         std::filesystem::create_symlink(dir.file("good.bin"), prefix + ".bin");
         IndexedDataset::open(prefix);
       }},
      {"indexed dataset file",
       [&dir](const std::string& p) {
         const std::string prefix = dir.file("as_bin");
         std::filesystem::remove(prefix + ".idx");
         std::filesystem::remove(prefix + ".bin");
         std::filesystem::create_symlink(dir.file("good.idx"), prefix + ".idx");
         std::filesystem::create_symlink(p, prefix + ".bin");
         IndexedDataset::open(prefix);
       }},
  };
  int cases = 0;
  for (const auto& [path, kind] : specials) {
    for (const auto& [what, read] : readers) {
      SCOPED_TRACE(what + " at " + path);
      expect_throw_with<InvalidArgument>([&] { read(path); },
                                         {"' is " + kind + ", not a regular file", what});
      ++cases;
    }
  }
  EXPECT_EQ(cases, 28);
}

TEST(InputFile, LinesAreBounded) {
  std::istringstream in("short\n" + std::string(100, 'x') + "\nlast");
  std::string line;
  ASSERT_TRUE(read_bounded_line(in, line, 100, "f:1"));
  EXPECT_EQ(line, "short");
  ASSERT_TRUE(read_bounded_line(in, line, 100, "f:2"));  // exactly the limit
  EXPECT_EQ(line.size(), 100u);
  ASSERT_TRUE(read_bounded_line(in, line, 100, "f:3"));  // no final newline
  EXPECT_EQ(line, "last");
  EXPECT_FALSE(read_bounded_line(in, line, 100, "f:4"));
  std::istringstream longer(std::string(101, 'x'));
  expect_throw_with<InvalidArgument>([&] { read_bounded_line(longer, line, 100, "f:7"); },
                                     {"f:7: line longer than 100 bytes (the limit)"});
  // A lengths file line beyond its limit names the file and line.
  TempDir dir;
  const std::string path =
      dir.write("lengths.csv", "4\n" + std::string(kMaxLengthsLineBytes + 1, '7') + "\n");
  expect_throw_with<InvalidArgument>(
      [&] { read_lengths_file(path); },
      {path + ":2: line longer than " + std::to_string(kMaxLengthsLineBytes) + " bytes"});
}

TEST(InputFile, ConfigFilesAreBounded) {
  TempDir dir;
  const std::string path = dir.write("config.json", std::string(2000, ' ') + "{}");
  EXPECT_EQ(read_input_file(path, "config", 2002).size(), 2002u);
  expect_throw_with<InvalidArgument>([&] { read_input_file(path, "config", 2001); },
                                     {"config '" + path + "' has 2002 bytes; the limit is 2001"});
  expect_throw_with<InvalidArgument>([&] { read_input_file(dir.file("none"), "config", 10); },
                                     {"cannot open config '" + dir.file("none") + "'"});
}

TEST(InputFile, AMappedFileThatShrinksIsAnErrorNotASigbus) {
  TempDir dir;
  {
    IndexedDatasetWriter writer(dir.file("d"), TokenDType::kInt32);
    for (int i = 0; i < 2000; ++i) writer.add_sequence(std::vector<int64_t>(8, i));
    writer.finish();
  }
  const auto d = IndexedDataset::open(dir.file("d"));
  const int64_t bin_bytes = 2000 * 8 * 4;
  for (int64_t cut : {bin_bytes - 1, bin_bytes / 2, int64_t{0}}) {
    ASSERT_EQ(::truncate(dir.file("d.bin").c_str(), cut), 0);
    // Samples before the cut are still there; the last one is gone and says so.
    if (cut >= 32) {
      EXPECT_EQ(d->sample(0).input_ids, std::vector<int64_t>(8, 0));
    }
    expect_throw_with<InvalidArgument>(
        [&] { d->sample(1999); },
        {dir.file("d.bin") + ": the file shrank from " + std::to_string(bin_bytes) + " to " +
         std::to_string(cut) + " bytes while open"});
  }
  // The index shrinking: the pointers read from it.
  ASSERT_EQ(::truncate(dir.file("d.idx").c_str(), 100), 0);
  expect_throw_with<InvalidArgument>([&] { d->pointer(1999); },
                                     {dir.file("d.idx") + ": the file shrank"});
  // A file replaced under the same path (another inode) leaves the mapped one intact.
  const auto e = [&] {
    IndexedDatasetWriter writer(dir.file("e"), TokenDType::kInt32);
    writer.add_sequence(std::vector<int64_t>{5, 6});
    writer.finish();
    return IndexedDataset::open(dir.file("e"));
  }();
  std::filesystem::remove(dir.file("e.bin"));
  dir.write("e.bin", "");
  EXPECT_EQ(e->sample(0).input_ids, (std::vector<int64_t>{5, 6}));
}

}  // namespace
}  // namespace thdpack
