// Hostile input (SPEC §10) for the readers and offline packing: damaged Megatron indexed datasets,
// JSONL and lengths files that are not what they should be, mock configs with unknown keys or
// wrong types, samples longer than the capacity (damaged pack files: hostile_pack_file_test.cpp).
// Every case must be an InvalidArgument whose message names the file and the position (byte, line,
// sequence or sample), never a crash, a hang or a silently wrong result.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "expect_throw.hpp"
#include "megatron_index.hpp"
#include "temp_dir.hpp"
#include "thdpack/core/dataset.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/indexed_dataset.hpp"
#include "thdpack/data/jsonl_dataset.hpp"
#include "thdpack/data/lengths_file.hpp"
#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/packing/offline_packing.hpp"

namespace thdpack {
namespace {

using test_util::expect_throw_with;
using test_util::TempDir;
using testing::MegatronIndex;
using testing::patch;
using testing::put;
using testing::read_bytes;
using testing::write_bytes;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Runs `body`, which must throw InvalidArgument and nothing else; returns the message.
template <typename F>
std::string invalid_argument_message(F&& body) {
  try {
    body();
  } catch (const InvalidArgument& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InvalidArgument, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected InvalidArgument, nothing was thrown";
  return "";
}

// ---------------------------------------------------------------------------------------------
// Megatron indexed datasets
//
// The base file: int32 tokens, sequences of lengths 3, 1, 2, one document each. Byte offsets in
// the .idx: lengths at 34, 38, 42; pointers (0, 12, 16) at 46, 54, 62; document indices
// (0, 1, 2, 3) at 70, 78, 86, 94; 102 bytes in all. The .bin holds 24 bytes.

class HostileIndexed : public ::testing::Test {
 protected:
  HostileIndexed() : prefix_(dir_.file("data")), idx_(prefix_ + ".idx"), bin_(prefix_ + ".bin") {}

  static MegatronIndex base() { return MegatronIndex::of({3, 1, 2}, 4, 4); }
  static std::string base_bin() {
    std::string bin;
    for (int32_t t : {10, 11, 12, 20, 30, 31}) put(bin, t);
    return bin;
  }
  void write(const std::string& idx, const std::string& bin) const {
    write_bytes(idx_, idx);
    write_bytes(bin_, bin);
  }
  void write(const MegatronIndex& idx) const { write(idx.bytes(), base_bin()); }
  // Opening must fail with InvalidArgument mentioning every needle.
  void expect_open_fails(std::initializer_list<std::string> needles) const {
    expect_throw_with<InvalidArgument>([&] { IndexedDataset::open(prefix_); }, needles);
  }

  TempDir dir_;
  std::string prefix_, idx_, bin_;
};

TEST_F(HostileIndexed, TheBaseFileIsValid) {
  ASSERT_EQ(base().bytes().size(), 102u);
  write(base());
  const auto d = IndexedDataset::open(prefix_);
  EXPECT_EQ(d->size(), 3);
  EXPECT_EQ(d->sample(2).input_ids, (std::vector<int64_t>{30, 31}));
}

TEST_F(HostileIndexed, TruncatedBin) {
  write(base().bytes(), base_bin().substr(0, 23));
  expect_open_fails({idx_ + ": byte 62: sequence 2 ends at byte 24 but " + bin_ +
                     " has only 23 bytes (truncated data file"});
  write(base().bytes(), base_bin().substr(0, 10));
  expect_open_fails({idx_ + ": byte 46: sequence 0 ends at byte 12", "has only 10 bytes"});
}

TEST_F(HostileIndexed, BinLongerThanTheIndexAccountsFor) {
  write(base().bytes(), base_bin() + std::string(4, '\0'));
  expect_open_fails({bin_ + ": byte 24: 4 bytes after the last sequence", idx_,
                     "accounts for 24 of its 28 bytes", "does not match this data file"});
}

TEST_F(HostileIndexed, LengthRunningPastTheData) {
  MegatronIndex idx = base();
  idx.lengths[2] = 5;  // 20 bytes from byte 16: past the 24-byte .bin
  write(idx);
  expect_open_fails(
      {idx_ + ": byte 62: sequence 2 ends at byte 36 but " + bin_ + " has only 24 bytes"});
  idx.lengths[2] = std::numeric_limits<int32_t>::max();
  write(idx);
  expect_open_fails({idx_ + ": byte 62: sequence 2 ends at byte 8589934604"});
}

TEST_F(HostileIndexed, PointerPastTheData) {
  MegatronIndex idx = base();
  idx.pointers[1] = 1000;
  write(idx);
  expect_open_fails({idx_ + ": byte 54: sequence 1 points to byte 1000 of " + bin_ +
                     ", but the lengths before it put it at 12"});
  idx.pointers[1] = -8;
  write(idx);
  expect_open_fails({idx_ + ": byte 54: sequence 1 points to byte -8"});
  idx = base();
  idx.pointers[0] = 4;  // the first sequence must start at byte 0
  write(idx);
  expect_open_fails({idx_ + ": byte 46: sequence 0 points to byte 4"});
}

TEST_F(HostileIndexed, WrongMagic) {
  for (const std::string& magic :
       {std::string("MMIDIDX\0\1", 9), std::string("mmidIDX\0\0", 9), std::string("NOTMAGIC!")}) {
    MegatronIndex idx = base();
    idx.magic = magic;
    write(idx);
    expect_open_fails({idx_ + ": byte 0: not a Megatron indexed dataset index"});
  }
  // A .bin passed as the index.
  write(base_bin() + base_bin(), base_bin());
  expect_open_fails({idx_ + ": byte 0: not a Megatron"});
}

TEST_F(HostileIndexed, WrongVersion) {
  for (uint64_t version : {uint64_t{0}, uint64_t{2}, ~uint64_t{0}}) {
    MegatronIndex idx = base();
    idx.version = version;
    write(idx);
    expect_open_fails(
        {idx_ + ": byte 9: unsupported version " + std::to_string(version) + " (expected 1)"});
  }
}

TEST_F(HostileIndexed, UnknownDtypeCode) {
  for (int code : {0, 9, 255}) {
    MegatronIndex idx = base();
    idx.dtype_code = static_cast<uint8_t>(code);
    write(idx);
    expect_open_fails({idx_ + ": byte 17: unknown dtype code " + std::to_string(code)});
  }
}

TEST_F(HostileIndexed, DtypeMismatch) {
  // The index says int64 (pointers consistent with it), the .bin holds int32-sized data.
  write(MegatronIndex::of({3, 1, 2}, 5, 8).bytes(), base_bin());
  expect_open_fails(
      {idx_ + ": byte 54: sequence 1 ends at byte 32 but " + bin_ + " has only 24 bytes"});
  // Only the dtype code changed: int32 pointers no longer match int64 lengths.
  MegatronIndex idx = base();
  idx.dtype_code = 5;
  write(idx);
  expect_open_fails({idx_ + ": byte 54: sequence 1 points to byte 12 of " + bin_ +
                     ", but the lengths before it put it at 24"});
  // And the other way round: int16 lengths over an int32 file leave half the .bin unaccounted.
  write(MegatronIndex::of({3, 1, 2}, 3, 2).bytes(), base_bin());
  expect_open_fails({bin_ + ": byte 12: 12 bytes after the last sequence"});
}

TEST_F(HostileIndexed, CountsThatDoNotFitTheFile) {
  MegatronIndex idx = base();
  idx.sequence_count = uint64_t{1} << 62;
  write(idx);
  expect_open_fails({idx_ + ": byte 18: sequence count 4611686018427387904 and document count 4",
                     "do not fit a 102-byte index"});
  idx = base();
  idx.document_count = ~uint64_t{0};
  write(idx);
  expect_open_fails({idx_ + ": byte 18:", "do not fit a 102-byte index"});
  idx = base();
  idx.sequence_count = 4;  // fits by size, but the arrays then need 80 bytes, not 68
  write(idx);
  expect_open_fails({idx_ + ": byte 18: the index holds 68 bytes after its header, but 4 "
                            "sequences and 4 documents need 80"});
  idx = base();
  idx.document_count = 3;
  write(idx);
  expect_open_fails({idx_ + ": byte 18: the index holds 68 bytes", "need 60"});
  // Mode bytes must be exactly one per sequence.
  idx = base();
  idx.modes = {0, 0, 0, 0};
  write(idx);
  expect_open_fails({idx_ + ": byte 18:", "one mode byte per sequence"});
}

TEST_F(HostileIndexed, NegativeAndZeroLengths) {
  for (int32_t bad : {-5, 0, std::numeric_limits<int32_t>::min()}) {
    MegatronIndex idx = base();
    idx.lengths[1] = bad;
    write(idx);
    expect_open_fails({idx_ + ": byte 38: sequence 1 has length " + std::to_string(bad) +
                       "; lengths must be >= 1"});
  }
}

TEST_F(HostileIndexed, DocumentIndicesThatDoNotRiseFromZeroToTheCount) {
  struct Case {
    std::vector<int64_t> docs;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{0, 2, 1, 3},
       ": byte 86: document index 2 is 1 after 2; document indices must not decrease and must "
       "run from 0 to the sequence count 3"},
      {{1, 1, 2, 3}, ": byte 70: document index 0 is 1"},
      {{-1, 1, 2, 3}, ": byte 70: document index 0 is -1"},
      {{0, 1, 5, 3}, ": byte 86: document index 2 is 5"},
      {{0, 1, 2, 2}, ": byte 94: the last document index is 2, not the sequence count 3"},
      {{0, 3, 2, 3}, ": byte 86: document index 2 is 2 after 3"},
  };
  for (const Case& c : cases) {
    MegatronIndex idx = base();
    idx.document_indices = c.docs;
    write(idx);
    expect_open_fails({idx_ + c.message});
  }
  MegatronIndex none = base();
  none.document_indices.clear();
  write(none);
  expect_open_fails({idx_ + ": byte 26: document count 0"});
}

TEST_F(HostileIndexed, EmptyFiles) {
  write("", base_bin());
  expect_open_fails(
      {idx_ +
       ": byte 0: file of 0 bytes is shorter than the 34-byte header of an indexed dataset"});
  write(base().bytes().substr(0, 33), base_bin());
  expect_open_fails({idx_ + ": byte 0: file of 33 bytes"});
  write(base().bytes(), "");
  expect_open_fails(
      {idx_ + ": byte 46: sequence 0 ends at byte 12 but " + bin_ + " has only 0 bytes"});
  // An index of no sequences over an empty .bin is a valid, empty dataset.
  write(MegatronIndex::of({}, 4, 4).bytes(), "");
  EXPECT_EQ(IndexedDataset::open(prefix_)->size(), 0);
  write(MegatronIndex::of({}, 4, 4).bytes(), "x");
  expect_open_fails({bin_ + ": byte 0: 1 bytes after the last sequence"});
}

TEST_F(HostileIndexed, MissingFiles) {
  expect_open_fails({"cannot open indexed dataset file '" + idx_ + "'", "No such file"});
  write_bytes(idx_, base().bytes());
  expect_open_fails({"cannot open indexed dataset file '" + bin_ + "'", "No such file"});
  std::filesystem::remove(idx_);
  write_bytes(bin_, base_bin());
  expect_open_fails({"cannot open indexed dataset file '" + idx_ + "'"});
  // A directory where the index should be.
  std::filesystem::create_directory(idx_);
  expect_open_fails({"indexed dataset file '" + idx_ + "' is a directory, not a regular file"});
}

TEST_F(HostileIndexed, FloatTokensThatAreNotIntegers) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float bad : {1.5f, -0.25f, nan, std::numeric_limits<float>::infinity(), 1e30f}) {
    std::string bin;
    for (float t : {1.0f, 2.0f, 3.0f, 4.0f, bad, 6.0f}) put(bin, t);
    write(MegatronIndex::of({3, 1, 2}, 7, 4).bytes(), bin);
    const auto d = IndexedDataset::open(prefix_);  // tokens are read lazily
    EXPECT_EQ(d->sample(1).input_ids, std::vector<int64_t>{4});
    expect_throw_with<InvalidArgument>(
        [&] { d->sample(2); },
        {bin_ + ": byte 16: token 0 of sequence 2 is ", "not an integer token id that fits int64"});
  }
  // float64 2^63 does not fit int64; -2^63 does, but is no token id (ids are >= 0).
  std::string bin;
  for (double t : {-9223372036854775808.0, 9223372036854775808.0}) put(bin, t);
  write(MegatronIndex::of({1, 1}, 6, 8).bytes(), bin);
  const auto d = IndexedDataset::open(prefix_);
  expect_throw_with<InvalidArgument>(
      [&] { d->sample(0); },
      {bin_ + ": byte 0: token 0 of sequence 0 is -9223372036854775808", "token ids are >= 0"});
  expect_throw_with<InvalidArgument>(
      [&] { d->sample(1); }, {bin_ + ": byte 8: token 0 of sequence 1 is 9.2233720368547758e+18"});
}

// A signed dtype holds negative values, which are no token ids: reading one names the file, the
// byte and the sequence (as JSONL refuses them).
TEST_F(HostileIndexed, NegativeTokensOfASignedDtype) {
  std::string bin;
  for (int32_t t : {5, 6, -3, 7}) put(bin, t);
  write(MegatronIndex::of({2, 2}, 4, 4).bytes(), bin);
  const auto d = IndexedDataset::open(prefix_);
  EXPECT_EQ(d->sample(0).input_ids, (std::vector<int64_t>{5, 6}));
  expect_throw_with<InvalidArgument>(
      [&] { d->sample(1); },
      {bin_ + ": byte 8: token 0 of sequence 1 is -3", "token ids are >= 0"});
}

// Every truncation and every single-byte corruption of a valid index is an InvalidArgument or a
// dataset that reads back completely: never a crash or another exception.
TEST_F(HostileIndexed, EveryTruncationAndByteFlipIsCaught) {
  const std::string good = base().bytes();
  for (size_t n = 0; n < good.size(); ++n) {
    write(good.substr(0, n), base_bin());
    const std::string message = invalid_argument_message([&] { IndexedDataset::open(prefix_); });
    EXPECT_NE(message.find(idx_ + ": byte "), std::string::npos) << n << " bytes: " << message;
  }
  std::vector<std::pair<size_t, int>> opened;
  for (size_t at = 0; at < good.size(); ++at) {
    for (unsigned char mask : {0x01, 0x80, 0xff}) {
      std::string bad = good;
      bad[at] = static_cast<char>(bad[at] ^ mask);
      write(bad, base_bin());
      try {
        const auto d = IndexedDataset::open(prefix_);
        for (int64_t i = 0; i < d->size(); ++i) d->sample(i);
        opened.emplace_back(at, mask);
      } catch (const InvalidArgument& e) {
        EXPECT_NE(std::string(e.what()).find(prefix_), std::string::npos) << e.what();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "byte " << at << " ^ " << int(mask) << ": " << e.what();
      }
    }
  }
  // Every byte matters but two flips that make a legal empty document: document index 1 from 1 to
  // 0 and document index 2 from 2 to 3.
  EXPECT_EQ(opened, (std::vector<std::pair<size_t, int>>{{78, 0x01}, {86, 0x01}}));
}

// ---------------------------------------------------------------------------------------------
// JSONL

struct JsonlCase {
  std::string line;
  std::vector<std::string> needles;
};

void expect_jsonl_line_fails(const TempDir& dir, const JsonlCase& c) {
  // The bad line is line 3, after a good line and a blank one.
  const std::string path =
      dir.write("bad.jsonl", "{\"input_ids\":[1,2]}\n\n" + c.line + "\n" + "{\"input_ids\":[3]}\n");
  const std::string message = invalid_argument_message([&] { load_jsonl_dataset(path); });
  EXPECT_NE(message.find(path + ":3: "), std::string::npos) << c.line << " -> " << message;
  for (const std::string& needle : c.needles) {
    EXPECT_NE(message.find(needle), std::string::npos)
        << c.line << " -> " << message << " does not mention " << needle;
  }
}

TEST(HostileJsonl, BrokenLines) {
  TempDir dir;
  for (const JsonlCase& c : std::vector<JsonlCase>{
           {R"({"input_ids":[1,2)", {"not valid JSON"}},
           {R"({"input_ids":[1,2]}})", {"not valid JSON"}},
           {R"({"input_ids":[1,2]} {"input_ids":[3]})", {"not valid JSON"}},
           {std::string("{\"input_ids\":[1,") + '\0' + "2]}", {"NUL byte at column 17"}},
           {"{\"input_ids\":[1],\"text\":\"\xff\xfe\"}", {"not valid JSON"}},
           {"\x01\x02\x03", {"not valid JSON"}},
           {"input_ids: [1, 2]", {"not valid JSON"}},
           // A number past double used to escape as nlohmann's out_of_range, without file or line.
           {R"({"input_ids":[1,1e400]})",
            {"the value of \"input_ids\" does not fit a double",
             "number overflow parsing '1e400'"}},
           {"{'input_ids': [1, 2]}", {"not valid JSON"}},
       }) {
    expect_jsonl_line_fails(dir, c);
  }
}

TEST(HostileJsonl, WrongTypes) {
  TempDir dir;
  for (const JsonlCase& c : std::vector<JsonlCase>{
           {"null", {"expected a JSON object"}},
           {"[{\"input_ids\":[1]}]", {"expected a JSON object"}},
           {"\"input_ids\"", {"expected a JSON object"}},
           {R"({"input_ids":"1 2 3"})", {"\"input_ids\" must be a list of integers"}},
           {R"({"input_ids":{"0":1}})", {"\"input_ids\" must be a list of integers"}},
           {R"({"input_ids":null})", {"\"input_ids\" must be a list of integers"}},
           {R"({"input_ids":[[1,2]]})", {"\"input_ids\"[0] must be an integer, got [1,2]"}},
           {R"({"input_ids":[1,true]})", {"\"input_ids\"[1] must be an integer, got true"}},
           {R"({"input_ids":[1,2],"loss_mask":"11"})", {"\"loss_mask\" must be a list of 0/1"}},
           {R"({"input_ids":[1,2],"loss_mask":[1,0.5]})", {"\"loss_mask\"[1] must be 0 or 1"}},
           {R"({"input_ids":[1,2],"labels":[true,false]})", {"\"labels\"[0] must be an integer"}},
           {R"({"input_ids":[1,2],"labels":{"a":1}})", {"\"labels\" must be a list"}},
           {R"({"ids":[1,2]})", {"unknown key \"ids\""}},
       }) {
    expect_jsonl_line_fails(dir, c);
  }
}

TEST(HostileJsonl, NegativeAndAbsurdValuesAndLengths) {
  TempDir dir;
  for (const JsonlCase& c : std::vector<JsonlCase>{
           {R"({"input_ids":[]})", {"\"input_ids\" is empty"}},
           {R"({"input_ids":[5,-1]})", {"\"input_ids\"[1] = -1 is below the smallest allowed"}},
           {R"({"input_ids":[-9223372036854775808]})", {"\"input_ids\"[0] = -9223372036854775808"}},
           // Past int64: these used to wrap (2^63 to -2^63; 2^64-100 to the ignore id -100).
           {R"({"input_ids":[9223372036854775808]})",
            {"\"input_ids\"[0] = 9223372036854775808 is out of range"}},
           {R"({"input_ids":[1,2],"labels":[18446744073709551516,2]})",
            {"\"labels\"[0] = 18446744073709551516 is out of range"}},
           {R"({"input_ids":[1e30]})", {"\"input_ids\"[0] must be an integer"}},
           {R"({"input_ids":[1,2],"labels":[-100,-101]})", {"\"labels\"[1] = -101"}},
           {R"({"input_ids":[1,2,3],"loss_mask":[1,1]})",
            {"\"loss_mask\" has 2 entries but \"input_ids\" has 3"}},
           {R"({"input_ids":[1,2],"labels":[1,2,3,4]})",
            {"\"labels\" has 4 entries but \"input_ids\" has 2"}},
       }) {
    expect_jsonl_line_fails(dir, c);
  }
  // 2^63 - 1 itself is a token id.
  const std::string path = dir.write("max.jsonl", R"({"input_ids":[9223372036854775807]})");
  EXPECT_EQ(load_jsonl_dataset(path)->sample(0).input_ids, std::vector<int64_t>{kInt64Max});
}

// ---------------------------------------------------------------------------------------------
// Lengths files

TEST(HostileLengths, GarbageLinesNameFileAndLine) {
  TempDir dir;
  const std::vector<std::string> garbage = {std::string("\x00\x01\x02", 3),
                                            "1e5",
                                            "0x10",
                                            "\xd9\xa3",
                                            "5;6",
                                            "+5",
                                            "--5",
                                            "5 # five",
                                            "NaN",
                                            "inf",
                                            std::string("12\0", 3),
                                            "\xef\xbb\xbf"
                                            "7",
                                            std::string(400, '9'),
                                            "1,000"};
  for (size_t i = 0; i < garbage.size(); ++i) {
    // The garbage is line 3; line 1 is a length, so it cannot pass for a header.
    const std::string path =
        dir.write(std::to_string(i) + ".csv", std::string("100\n\n") + garbage[i] + "\n200\n");
    const std::string message = invalid_argument_message([&] { read_lengths_file(path); });
    EXPECT_NE(message.find(path + ":3: "), std::string::npos)
        << "line " << ::testing::PrintToString(garbage[i]) << " -> " << message;
  }
}

TEST(HostileLengths, NegativeZeroAndAbsurdLengths) {
  TempDir dir;
  const std::string zero = dir.write("z.csv", "len\n5\n0\n");
  expect_throw_with<InvalidArgument>([&] { read_lengths_file(zero); },
                                     {zero + ":3: length must be >= 1, got 0"});
  const std::string negative = dir.write("n.csv", "5\n-7\n");
  expect_throw_with<InvalidArgument>([&] { read_lengths_file(negative); },
                                     {negative + ":2: length must be >= 1, got -7"});
  const std::string huge = dir.write("h.csv", "5\n9223372036854775808\n");
  expect_throw_with<InvalidArgument>([&] { read_lengths_file(huge); },
                                     {huge + ":2: length '9223372036854775808' is out of range"});
  // A binary file: its first line passes for a header, the next is garbage.
  const std::string binary = dir.write("b.csv", std::string("\x7f"
                                                            "ELF\x02\x01\n\x03\x00\x3e",
                                                            9));
  expect_throw_with<InvalidArgument>([&] { read_lengths_file(binary); }, {binary + ":2: "});
}

// ---------------------------------------------------------------------------------------------
// Mock config JSON

TEST(HostileMockConfig, UnknownKeys) {
  expect_throw_with<InvalidArgument>(
      [] {
        parse_mock_config(R"({"type":"uniform","min_seq_len":1,"max_seq_len":2,"colour":"red"})");
      },
      {"unknown key 'colour'", "allowed keys: mode, type, min_seq_len, max_seq_len, size, seed"});
  expect_throw_with<InvalidArgument>(
      [] { parse_mock_config(R"({"mode":"file","path":"l.csv","seed":1})"); },
      {"unknown key 'seed'", "allowed keys: mode, path"});
  // Keys are case-sensitive, as in Megatron.
  expect_throw_with<InvalidArgument>(
      [] { parse_mock_config(R"({"type":"uniform","Min_seq_len":1,"max_seq_len":2})"); },
      {"missing key 'min_seq_len'"});
}

TEST(HostileMockConfig, WrongTypes) {
  const std::string base = R"("type":"uniform","min_seq_len":1,"max_seq_len":2)";
  struct Case {
    std::string json;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"{" + base + R"(,"size":1.5})", "'size' must be an integer, got 1.5"},
           {"{" + base + R"(,"size":"10"})", "'size' must be an integer, got \"10\""},
           {"{" + base + R"(,"seed":null})", "'seed' must be an integer, got null"},
           {"{" + base + R"(,"seed":18446744073709551615})",
            "'seed' must be an integer that fits int64, got 18446744073709551615"},
           {R"({"type":"uniform","min_seq_len":1,"max_seq_len":9223372036854775808})",
            "'max_seq_len' must be an integer that fits int64"},
           {R"({"mode":1})", "'mode' must be a string, got 1"},
           {R"({"type":["uniform"]})", "'type' must be a string"},
           {R"({"type":"uniform","min_seq_len":true,"max_seq_len":2})",
            "'min_seq_len' must be an integer, got true"},
           {R"({"type":"lognormal","min_seq_len":1,"max_seq_len":2,"mean_seq_len":"1",)"
            R"("lognormal_sigma":1})",
            "'mean_seq_len' must be a number"},
           {R"({"mode":"file","path":["a"]})", "'path' must be a string"},
           {"[1]", "must be a JSON object"},
           {"7", "must be a JSON object"},
           {"", "not valid JSON"},
           {"{\"type\":\"uniform\"", "not valid JSON"},
           {R"({"type":"uniform","min_seq_len":1e400,"max_seq_len":2})",
            "the value of \"min_seq_len\" does not fit a double"},
           {"{\"type\":\"uni\xff\"}", "not valid JSON"},
       }) {
    const std::string message = invalid_argument_message([&] { parse_mock_config(c.json); });
    EXPECT_NE(message.find("mock dataset config"), std::string::npos) << message;
    EXPECT_NE(message.find(c.message), std::string::npos)
        << c.json << " -> " << message << " does not mention " << c.message;
  }
}

TEST(HostileMockConfig, AbsurdValues) {
  // A sigma whose square overflows used to give NaN lengths (undefined when converted).
  expect_throw_with<InvalidArgument>(
      [] {
        parse_mock_config(R"({"min_seq_len":1,"max_seq_len":2,"mean_seq_len":1,)"
                          R"("lognormal_sigma":1.7e308})");
      },
      {"'lognormal_sigma' must be in [0, 1e150]"});
  MockConfig c = default_mock_config(8192);
  c.mean_seq_len = std::numeric_limits<double>::infinity();
  expect_throw_with<InvalidArgument>([&] { validate(c); },
                                     {"'mean_seq_len' must be > 0 and finite"});
  c = default_mock_config(8192);
  c.lognormal_sigma = std::numeric_limits<double>::quiet_NaN();
  expect_throw_with<InvalidArgument>([&] { validate(c); }, {"'lognormal_sigma'"});
  // A ceiling of 2^63 - 1 is 2^63 as a double: lengths clipped to it must still be exactly it
  // (they used to convert 2^63 back to int64, which is undefined).
  const MockConfig wide =
      parse_mock_config(R"({"min_seq_len":1,"max_seq_len":9223372036854775807,"mean_seq_len":1e30,)"
                        R"("lognormal_sigma":0,"size":10})");
  const auto d = make_mock_dataset(wide);
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(d->length(i), kInt64Max);
}

// ---------------------------------------------------------------------------------------------
// Offline packing: samples longer than the capacity

TEST(HostilePacking, SampleLongerThanTheCapacity) {
  const std::vector<int64_t> lengths = {10, 50, 200, 30};
  for (PackStrategy strategy : {PackStrategy::kBestFitDecreasing, PackStrategy::kFirstFitDecreasing,
                                PackStrategy::kNextFit}) {
    OfflinePackOptions o;
    o.capacity = 100;
    o.strategy = strategy;
    expect_throw_with<InvalidArgument>(
        [&] { pack_offline(lengths, o); },
        {"sample 2 has 200 tokens but the pack capacity is 100", "--capacity"});
  }
  OfflinePackOptions padded;
  padded.capacity = 100;
  padded.divisor = 8;  // 99 pads to 104
  expect_throw_with<InvalidArgument>(
      [&] {
        pack_offline(std::vector<int64_t>{8, 99}, padded);
      },
      {"sample 1 has 99 tokens, 104 once padded to a multiple of the divisor 8, but the pack "
       "capacity is 100; raise the capacity or lower the divisor (capacity, divisor: -C, --divisor "
       "on the command line)"});
  // A length near 2^63 is rejected before it is rounded up (which would overflow).
  expect_throw_with<InvalidArgument>(
      [&] {
        pack_offline(std::vector<int64_t>{8, kInt64Max}, padded);
      },
      {"sample 1 has 9223372036854775807 tokens"});
}

TEST(HostilePacking, NegativeAndZeroLengthsAndBadOptions) {
  OfflinePackOptions o;
  o.capacity = 100;
  for (int64_t bad : {int64_t{0}, int64_t{-4}, std::numeric_limits<int64_t>::min()}) {
    expect_throw_with<InvalidArgument>(
        [&] {
          pack_offline(std::vector<int64_t>{5, bad}, o);
        },
        {"sample 1 has length " + std::to_string(bad) + "; lengths must be >= 1"});
  }
  o.capacity = 0;
  expect_throw_with<InvalidArgument>([&] { pack_offline(std::vector<int64_t>{5}, o); },
                                     {"pack capacity must be >= 1, got 0"});
  o.capacity = 100;
  o.divisor = 0;
  expect_throw_with<InvalidArgument>([&] { pack_offline(std::vector<int64_t>{5}, o); },
                                     {"padding divisor must be >= 1"});
}

TEST(HostilePacking, GroupLongerThanTheCapacity) {
  const std::vector<int64_t> lengths = {40, 60, 60, 30};
  const std::vector<int64_t> groups = {3, 17, 17, 3};
  OfflinePackOptions o;
  o.capacity = 100;
  o.group_ids = groups;
  expect_throw_with<InvalidArgument>(
      [&] { pack_offline(lengths, o); },
      {"group 17 (2 samples from sample 1) has 120 padded tokens but the pack capacity is 100"});
  const std::vector<int64_t> short_groups = {1, 2};
  o.group_ids = short_groups;
  expect_throw_with<InvalidArgument>([&] { pack_offline(lengths, o); }, {"one per sample"});
}

TEST(HostilePacking, StreamingPackerRejectsAndLosesNothing) {
  StreamingPacker packer(100, 2, 8);
  std::vector<std::vector<int64_t>> closed;
  packer.add(0, 30, closed);
  packer.add(1, 50, closed);
  expect_throw_with<InvalidArgument>([&] { packer.add(2, 101, closed); },
                                     {"sample 2 has 101 tokens", "fit the pack capacity 100"});
  expect_throw_with<InvalidArgument>(
      [&] { packer.add(3, 97, closed); },
      {"sample 3 has 97 tokens, 104 once padded to a multiple of the divisor 8, but the pack "
       "capacity is 100; raise the capacity or lower the divisor (capacity, divisor: -C, --divisor "
       "on the command line)"});
  expect_throw_with<InvalidArgument>([&] { packer.add(4, kInt64Max, closed); },
                                     {"sample 4 has 9223372036854775807 tokens"});
  for (int64_t bad : {int64_t{0}, int64_t{-1}}) {
    expect_throw_with<InvalidArgument>([&] { packer.add(5, bad, closed); },
                                       {"sample 5 has " + std::to_string(bad) + " tokens"});
  }
  // The rejected samples changed nothing: the accepted ones come out exactly once.
  packer.add(6, 10, closed);
  packer.flush(closed);
  std::vector<int64_t> seen;
  for (const auto& pack : closed) seen.insert(seen.end(), pack.begin(), pack.end());
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 6}));
  EXPECT_EQ(packer.open_packs(), 0);
  for (auto [c, open, d] : {std::tuple{0, 1, 1}, std::tuple{10, 0, 1}, std::tuple{10, 1, 0}}) {
    expect_throw_with<InvalidArgument>([&] { StreamingPacker(c, open, d); }, {">= 1"});
  }
  StreamingPacker plain(100, 1);
  expect_throw_with<InvalidArgument>([&] { plain.add(9, 101, closed); },
                                     {"sample 9 has 101 tokens; lengths must be >= 1 and fit the "
                                      "pack capacity 100"});
}

}  // namespace
}  // namespace thdpack
