// Damaged pack files (SPEC §10): every damage is an InvalidArgument naming the file and the byte,
// found before any pack is built; never a crash, an absurd allocation or a silently wrong pack.

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "data/readers.hpp"
#include "expect_throw.hpp"
#include "megatron_index.hpp"
#include "pack_file_seal.hpp"
#include "temp_dir.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/indexed_dataset.hpp"
#include "thdpack/data/pack_file.hpp"
#include "thdpack/packing/offline_packing.hpp"

namespace thdpack {
namespace {

using test_util::expect_throw_with;
using test_util::TempDir;
using testing::patch;
using testing::read_bytes;
using testing::write_bytes;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// The layout is in pack_file_seal.hpp.

class HostilePackFile : public ::testing::Test {
 protected:
  HostilePackFile() {
    source_ = dir_.write("source.jsonl",
                         "{\"input_ids\":[1,2,3]}\n{\"input_ids\":[4]}\n{\"input_ids\":[5,6]}\n"
                         "{\"input_ids\":[7,8,9,10]}\n{\"input_ids\":[11]}\n");
    path_ = dir_.file("packs.thd");
    // Packs {3, 4}, {0, 1, 2}: 5 samples.
    packs_.offsets = {0, 2, 5};
    packs_.items = {3, 4, 0, 1, 2};
    write_pack_file(path_, packs_, 8, 1, {"jsonl", source_, 5});
    good_ = read_bytes(path_);
    const size_t spec_at = 32 + 4 + 5 + 4;
    source_size_at_ = spec_at + source_.size();
    fingerprint_at_ = source_size_at_ + 8;
    pack_count_at_ = fingerprint_at_ + 8;
    sample_count_at_ = pack_count_at_ + 8;
    options_at_ = sample_count_at_ + 8;
    entries_at_ = options_at_ + 8;
    checksum_at_ = entries_at_ + 8;
    offsets_at_ = checksum_at_ + 8;
    ids_at_ = offsets_at_ + 3 * 8;
    index_at_ = ids_at_ + 5 * 8;
    file_checksum_at_ = index_at_ + 4 * 5 * 8;
  }
  /// `bytes` with both checksums made right again: damage only the deeper checks can catch.
  static std::string forged(std::string bytes) { return testing::resealed_pack_file(bytes); }
  void expect_open_fails(const std::string& bytes, std::initializer_list<std::string> needles) {
    write_bytes(path_, bytes);
    expect_throw_with<InvalidArgument>([&] { PackedDataset::open(path_); }, needles);
  }

  TempDir dir_;
  std::string source_, path_, good_;
  Bins packs_;
  size_t source_size_at_ = 0, fingerprint_at_ = 0, pack_count_at_ = 0, sample_count_at_ = 0,
         options_at_ = 0, entries_at_ = 0, checksum_at_ = 0, offsets_at_ = 0, ids_at_ = 0,
         index_at_ = 0, file_checksum_at_ = 0;
};

TEST_F(HostilePackFile, TheGoodFileOpens) {
  ASSERT_EQ(good_.size(), file_checksum_at_ + 8);
  const auto d = PackedDataset::open(path_);
  EXPECT_EQ(d->num_packs(), 2);
  EXPECT_EQ(std::vector<int64_t>(d->pack(1).begin(), d->pack(1).end()),
            (std::vector<int64_t>{0, 1, 2}));
}

TEST_F(HostilePackFile, WrongMagicAndVersion) {
  std::string bad = good_;
  bad[3] = 'X';
  expect_open_fails(bad, {path_ + ": byte 0: not a thdpack pack file (magic THDPACKS expected)"});
  expect_open_fails(std::string("MMIDIDX\0\0", 9) + good_.substr(9),
                    {path_ + ": byte 0: not a thdpack pack file"});
  bad = good_;
  patch(bad, 8, uint64_t{7});
  expect_open_fails(bad, {path_ + ": byte 8: unsupported pack file version 7"});
  bad = good_;
  patch(bad, 16, int64_t{0});
  expect_open_fails(bad, {path_ + ": byte 16: capacity 0 and divisor 1 must be >= 1"});
  bad = good_;
  patch(bad, 24, int64_t{-2});
  expect_open_fails(bad, {path_ + ": byte 16: capacity 8 and divisor -2 must be >= 1"});
}

TEST_F(HostilePackFile, Truncated) {
  expect_open_fails("", {path_ + ": byte 0: the file ends inside the magic"});
  expect_open_fails(good_.substr(0, 20), {path_ + ": byte 16: the file ends inside the capacity"});
  expect_open_fails(good_.substr(0, 38),
                    {path_ + ": byte 32: the file ends inside the source kind"});
  expect_open_fails(good_.substr(0, ids_at_ + 12),
                    {path_ + ": byte " + std::to_string(pack_count_at_) +
                     ": 2 packs and 5 sample indices and 5 JSONL index entries do not fit the "
                     "file's " +
                     std::to_string(ids_at_ + 12) + " bytes: the file is truncated or damaged"});
  // Every truncation is caught, naming the file and a byte.
  for (size_t n = 0; n < good_.size(); ++n) {
    write_bytes(path_, good_.substr(0, n));
    const std::string message =
        expect_throw_with<InvalidArgument>([&] { PackedDataset::open(path_); }, {});
    EXPECT_NE(message.find(path_ + ": byte "), std::string::npos) << n << " bytes: " << message;
  }
  expect_open_fails(good_ + "x",
                    {path_ + ": byte " + std::to_string(pack_count_at_) +
                     ": 2 packs and 5 sample indices and 5 JSONL index entries do not fit the "
                     "file's"});
}

TEST_F(HostilePackFile, CountsThatDoNotFit) {
  std::string bad = good_;
  patch(bad, pack_count_at_, ~uint64_t{0});  // packs + 1 used to wrap to 0 offsets
  expect_open_fails(bad, {path_ + ": byte " + std::to_string(pack_count_at_) +
                          ": pack count 18446744073709551615 does not fit the file"});
  bad = good_;
  patch(bad, pack_count_at_, uint64_t{1000});
  expect_open_fails(bad, {path_ + ": byte " + std::to_string(checksum_at_) +
                          ": the header checksum does not match: the file is damaged"});
  expect_open_fails(forged(bad), {path_ + ": byte " + std::to_string(pack_count_at_) +
                                  ": 1000 packs and 5 sample indices and 5 JSONL index entries "
                                  "do not fit the file's"});
  bad = good_;
  patch(bad, sample_count_at_, uint64_t{4});
  expect_open_fails(forged(bad), {"2 packs and 4 sample indices and 5 JSONL index entries do not "
                                  "fit the file's"});
  bad = good_;
  patch(bad, 32, uint32_t{0xffffffff});  // the kind's size
  expect_open_fails(bad, {path_ + ": byte 32: the file ends inside the source kind"});
}

TEST_F(HostilePackFile, OffsetsThatDoNotRise) {
  std::string bad = good_;
  patch(bad, offsets_at_ + 8, int64_t{6});
  // Damage: the checksum of the file. Forged: the offsets' own check.
  expect_open_fails(bad, {path_ + ": byte " + std::to_string(file_checksum_at_) +
                          ": the checksum of the file does not match: the file is damaged"});
  expect_open_fails(forged(bad), {path_ + ": byte " + std::to_string(offsets_at_ + 8) +
                                  ": pack offset 1 is 6; pack offsets must rise from 0 to the "
                                  "sample count 5"});
  bad = good_;
  patch(bad, offsets_at_, int64_t{1});
  expect_open_fails(forged(bad),
                    {path_ + ": byte " + std::to_string(offsets_at_) + ": pack offset 0 is 1"});
  bad = good_;
  patch(bad, offsets_at_ + 16, int64_t{4});
  expect_open_fails(forged(bad), {": pack offset 2 is 4"});
}

TEST_F(HostilePackFile, SampleIndexOutOfRange) {
  for (int64_t bad_index : {int64_t{5}, int64_t{-1}, kInt64Max}) {
    std::string bad = good_;
    patch(bad, ids_at_ + 3 * 8, bad_index);
    expect_open_fails(bad, {path_ + ": byte " + std::to_string(file_checksum_at_) +
                            ": the checksum of the file does not match"});
    expect_open_fails(forged(bad),
                      {path_ + ": byte " + std::to_string(ids_at_ + 24) + ": sample index " +
                       std::to_string(bad_index) + " (entry 3) is outside the source's 5 samples"});
  }
}

TEST_F(HostilePackFile, SamplesListedTwiceOrNotAtAll) {
  std::string bad = good_;
  patch(bad, ids_at_ + 4 * 8, int64_t{0});  // sample 0 in both packs, sample 2 in none
  expect_open_fails(forged(bad), {path_ + ": byte " + std::to_string(ids_at_ + 32) +
                                  ": sample index 0 (entry 4) appears a second time"});
  // A damaged source size: the header checksum catches it before anything is allocated by it.
  for (int64_t claimed : {int64_t{4}, int64_t{6}, int64_t{1} << 40, kInt64Max}) {
    bad = good_;
    patch(bad, source_size_at_, claimed);
    expect_open_fails(bad, {path_ + ": byte " + std::to_string(checksum_at_) +
                            ": the header checksum does not match"});
  }
  // Forged past the checksum: the JSONL index has an entry per sample of the source ...
  for (int64_t claimed : {int64_t{4}, int64_t{6}, kInt64Max}) {
    bad = good_;
    patch(bad, source_size_at_, claimed);
    expect_open_fails(forged(bad), {path_ + ": byte " + std::to_string(entries_at_) +
                                    ": the JSONL index has 5 entries; it has one per sample of "
                                    "the source (" +
                                    std::to_string(claimed) + ") or none"});
  }
  // ... and a file without one (version 3) lists fewer samples than the source has ...
  const std::string old = testing::as_version_3(good_);
  bad = old;
  patch(bad, source_size_at_, int64_t{4});
  expect_open_fails(forged(bad), {path_ + ": byte " + std::to_string(sample_count_at_) +
                                  ": the sample count 5 exceeds the source's 4 samples"});
  // ... or more than the source has (the jsonl source does not allocate by it).
  for (int64_t claimed : {int64_t{6}, int64_t{1} << 40, kInt64Max}) {
    bad = old;
    patch(bad, source_size_at_, claimed);
    expect_open_fails(forged(bad), {path_ + ": its source " + source_ +
                                    " now has 5 samples, not the " + std::to_string(claimed)});
  }
  // The writer refuses to make such a file.
  Bins twice = packs_;
  twice.items[4] = 0;
  expect_throw_with<InvalidArgument>(
      [&] {
        write_pack_file(path_, twice, 8, 1, {"jsonl", source_, 5});
      },
      {"sample 0 is in more than one pack"});
  expect_throw_with<InvalidArgument>(
      [&] {
        write_pack_file(path_, packs_, 8, 1, {"jsonl", source_, 4});
      },
      {"sample 4 is outside the source"});
}

TEST_F(HostilePackFile, BlendedSourceOfAnAbsurdSizeIsAnError) {
  // A blend allocates per requested sample, so its size is whatever the file says.
  for (const char* name : {"a", "b"}) {
    IndexedDatasetWriter writer(dir_.file(name), TokenDType::kInt32);
    for (int i = 0; i < 4; ++i) writer.add_sequence(std::vector<int64_t>(3, i));
    writer.finish();
  }
  const std::string blend = "1 " + dir_.file("a") + " 1 " + dir_.file("b");
  write_pack_file(path_, packs_, 8, 1, {"indexed", blend, 5});
  ASSERT_EQ(PackedDataset::open(path_)->num_packs(), 2);
  const std::string good = read_bytes(path_);
  const size_t size_at = 32 + 4 + 7 + 4 + blend.size();
  const size_t checksum_at = size_at + 48;
  for (int64_t claimed : {int64_t{1} << 60, kInt64Max}) {  // bad_alloc, length_error
    std::string bad = good;
    patch(bad, size_at, claimed);
    // Damage: the checksum. Forged: refused without escaping as a standard exception.
    expect_open_fails(bad, {path_ + ": byte " + std::to_string(checksum_at) +
                            ": the header checksum does not match"});
    expect_open_fails(forged(bad), {path_ + ": its indexed source of " + std::to_string(claimed) +
                                    " samples does not fit in memory"});
  }
}

TEST_F(HostilePackFile, SourceThatChanged) {
  // One more sample.
  dir_.write("source.jsonl",
             "{\"input_ids\":[1]}\n{\"input_ids\":[1]}\n{\"input_ids\":[1]}\n"
             "{\"input_ids\":[1]}\n{\"input_ids\":[1]}\n{\"input_ids\":[1]}\n");
  expect_throw_with<InvalidArgument>(
      [&] { PackedDataset::open(path_); },
      {path_ + ": its source " + source_ + " now has 6 samples, not the 5 it was packed from"});
  // The same number of samples, other tokens.
  dir_.write("source.jsonl",
             "{\"input_ids\":[1,2,3]}\n{\"input_ids\":[4]}\n{\"input_ids\":[5,6]}\n"
             "{\"input_ids\":[7,8,9,10]}\n{\"input_ids\":[12]}\n");
  expect_throw_with<InvalidArgument>(
      [&] { PackedDataset::open(path_); },
      {path_ + ": its source " + source_ + " changed since it was packed (same 5 samples"});
  // Damaged.
  dir_.write("source.jsonl", "{\"input_ids\":[1]}\n{\"input_ids\":[1]}\n{\"input_ids\":[1\n");
  expect_throw_with<InvalidArgument>(
      [&] { PackedDataset::open(path_); },
      {path_ + ": cannot open its jsonl source: " + source_ + ":3: not valid JSON"});
  // Gone.
  std::filesystem::remove(source_);
  expect_throw_with<InvalidArgument>(
      [&] { PackedDataset::open(path_); },
      {path_ + ": cannot open its jsonl source: cannot open JSONL file '" + source_ + "'"});
  // Of a kind no reader knows: refused when written, and when read.
  expect_throw_with<InvalidArgument>(
      [&] {
        write_pack_file(path_, packs_, 8, 1, {"feather", source_, 5});
      },
      {"unknown pack source kind 'feather'"});
  write_pack_file(path_, packs_, 8, 1, {"feather", source_, 5}, 0);
  expect_throw_with<InvalidArgument>([&] { PackedDataset::open(path_); },
                                     {path_, "unknown pack source kind 'feather'"});
  // Parquet, in a program without its reader (register_parquet_pack_source): how to get one.
  write_pack_file(path_, packs_, 8, 1, {"parquet", source_, 5}, 0);
  expect_throw_with<InvalidArgument>([&] { PackedDataset::open(path_); },
                                     {path_, "built with Parquet support"});
}

TEST_F(HostilePackFile, PacksLargerThanTheCapacityFailWhenRead) {
  // Pack 1 = samples {0, 1, 2} holds 6 tokens: with a capacity of 5 in the file it cannot be built,
  // pack 0 = {3, 4} (5 tokens) still can.
  std::string bad = good_;
  patch(bad, 16, int64_t{5});
  write_bytes(path_, forged(bad));
  const auto d = PackedDataset::open(path_);
  EXPECT_EQ(d->batch(0).cu_seqlens, (std::vector<int32_t>{0, 4, 5}));
  expect_throw_with<InvalidArgument>([&] { d->batch(1); }, {"6", "5"});
  expect_throw_with<InvalidArgument>([&] { d->pack(2); }, {"pack 2 outside [0, 2)"});
}

// Every single-bit flip anywhere in a pack file is caught, naming the file, before any pack is
// built: the checksums cover every byte, so no flip can move a pack boundary or swap a sample.
TEST_F(HostilePackFile, EveryFlippedBitIsCaught) {
  // A second file over an indexed source, with a longer body.
  IndexedDatasetWriter writer(dir_.file("ds"), TokenDType::kInt32);
  for (int i = 0; i < 40; ++i) writer.add_sequence(std::vector<int64_t>(1 + i % 7, i));
  writer.finish();
  Bins many;
  for (int64_t i = 0; i < 40; ++i) {
    many.items.push_back((i * 17) % 40);
    if (i % 3 == 2) many.offsets.push_back(i + 1);
  }
  many.offsets.push_back(40);
  const std::string indexed_path = dir_.file("indexed.thd");
  write_pack_file(indexed_path, many, 64, 2, {"indexed", dir_.file("ds"), 40});
  ASSERT_EQ(PackedDataset::open(indexed_path)->num_packs(), static_cast<int64_t>(many.count()));
  int64_t flips = 0;
  for (const std::string& path : {path_, indexed_path}) {
    const std::string good = read_bytes(path);
    for (size_t bit = 0; bit < good.size() * 8; ++bit) {
      std::string bad = good;
      bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
      // What PackedDataset::open runs on the file's bytes; every 53rd flip through the file too.
      expect_throw_with<InvalidArgument>(
          [&] {
            detail::parse_pack_file(std::as_bytes(std::span<const char>(bad.data(), bad.size())),
                                    path);
          },
          {path + ": byte "});
      if (bit % 53 == 0) {
        write_bytes(path, bad);
        expect_throw_with<InvalidArgument>([&] { PackedDataset::open(path); }, {path + ": byte "});
      }
      ++flips;
    }
    write_bytes(path, good);
  }
  EXPECT_GT(flips, 4000);
}

// A source rewritten with the same number of samples is refused, for every source kind and many
// random rewrites; rewriting the same content again is not a change.
TEST_F(HostilePackFile, ASourceRewrittenWithTheSameCountIsRefused) {
  std::mt19937_64 rng(7);
  int refused = 0;
  for (int trial = 0; trial < 30; ++trial) {
    std::vector<int64_t> lengths(5);
    for (auto& l : lengths) l = 1 + static_cast<int64_t>(rng() % 6);
    std::vector<int64_t> other = lengths;
    other[rng() % 5] += 1 + static_cast<int64_t>(rng() % 3);
    auto lengths_text = [](const std::vector<int64_t>& ls) {
      std::string text;
      for (int64_t l : ls) text += std::to_string(l) + "\n";
      return text;
    };
    auto write_index = [&](const std::vector<int64_t>& ls) {
      IndexedDatasetWriter w(dir_.file("src"), TokenDType::kInt32);
      for (int64_t l : ls) w.add_sequence(std::vector<int64_t>(static_cast<size_t>(l), 3));
      w.finish();
    };
    auto jsonl_text = [](const std::vector<int64_t>& ls) {
      std::string text;
      for (int64_t l : ls) text += "{\"input_ids\":[" + std::to_string(l) + "]}\n";
      return text;
    };
    const std::string lengths_path = dir_.file("lengths.csv");
    const std::string mock = "{\"mode\":\"file\",\"path\":\"" + lengths_path + "\"}";
    const std::vector<std::tuple<PackSource, std::function<void(const std::vector<int64_t>&)>>>
        sources = {{{"jsonl", source_, 5},
                    [&](const auto& ls) { dir_.write("source.jsonl", jsonl_text(ls)); }},
                   {{"mock", mock, 5},
                    [&](const auto& ls) { dir_.write("lengths.csv", lengths_text(ls)); }},
                   {{"indexed", dir_.file("src"), 5}, write_index}};
    for (const auto& [source, rewrite] : sources) {
      SCOPED_TRACE(source.kind + " trial " + std::to_string(trial));
      rewrite(lengths);
      Bins packs;
      packs.offsets = {0, 5};
      packs.items = {0, 1, 2, 3, 4};
      write_pack_file(path_, packs, 64, 1, source);
      rewrite(lengths);  // the same content again
      EXPECT_EQ(PackedDataset::open(path_)->num_packs(), 1);
      rewrite(other);
      expect_throw_with<InvalidArgument>(
          [&] { PackedDataset::open(path_); },
          {path_ + ": its source " + source.spec + " changed since it was packed (same 5 samples"});
      ++refused;
    }
  }
  EXPECT_EQ(refused, 90);
}

// The JSONL index of a version-4 file: damage is caught by the file's checksum; forged past it, an
// index whose lines do not follow each other is refused when the file is read, and one that
// disagrees with the source (it cannot while the fingerprint matches) when the line is read,
// naming the source's file and line.
TEST_F(HostilePackFile, DamagedJsonlIndex) {
  // The source's lines: 21, 17, 19, 24 and 18 bytes at bytes 0, 22, 40, 60 and 85.
  const auto entry_at = [&](size_t array, size_t sample) {
    return index_at_ + 8 * (5 * array + sample);
  };
  std::string bad = good_;
  patch(bad, entry_at(0, 1), int64_t{10});
  expect_open_fails(bad, {path_ + ": byte " + std::to_string(file_checksum_at_) +
                          ": the checksum of the file does not match: the file is damaged"});
  expect_open_fails(forged(bad), {path_ + ": byte " + std::to_string(entry_at(0, 1)) +
                                  ": JSONL index entry 1: its line starts at byte 10, before "
                                  "byte 22 (the lines of the index follow each other)"});
  bad = good_;
  patch(bad, entry_at(1, 2), int64_t{0});
  expect_open_fails(forged(bad), {path_ + ": byte " + std::to_string(entry_at(1, 2)) +
                                  ": JSONL index entry 2: its line of 0 bytes at byte 40"});
  bad = good_;
  patch(bad, entry_at(2, 3), int64_t{3});
  expect_open_fails(forged(bad), {path_ + ": byte " + std::to_string(entry_at(2, 3)) +
                                  ": JSONL index entry 3: line number 3"});
  bad = good_;
  patch(bad, entry_at(3, 4), int64_t{0});
  expect_open_fails(forged(bad), {path_ + ": byte " + std::to_string(entry_at(3, 4)) +
                                  ": JSONL index entry 4: a sample of 0 tokens"});
  bad = good_;
  patch(bad, entries_at_, uint64_t{3});
  expect_open_fails(bad, {path_ + ": byte " + std::to_string(checksum_at_) +
                          ": the header checksum does not match"});
  expect_open_fails(forged(bad), {path_ + ": byte " + std::to_string(entries_at_) +
                                  ": the JSONL index has 3 entries; it has one per sample of the "
                                  "source (5) or none"});
  bad = good_;
  patch(bad, options_at_, uint64_t{4});
  expect_open_fails(forged(bad), {path_ + ": byte " + std::to_string(options_at_) +
                                  ": unknown JSONL options 4 (this build knows 3)"});

  // Well formed but not the source's lines. Past its end: refused on open.
  bad = good_;
  patch(bad, entry_at(0, 4), int64_t{1000});
  expect_open_fails(forged(bad), {path_ + ": cannot open its jsonl source: " + source_ +
                                  ":5: the line of sample 4 ends at byte 1018, past the end of "
                                  "the file (104 bytes)"});
  // A line that is not a sample, or another number of tokens: refused when the sample is read.
  bad = good_;
  patch(bad, entry_at(0, 2), int64_t{41});
  patch(bad, entry_at(1, 2), int64_t{18});
  patch(bad, entry_at(3, 3), int64_t{5});
  write_bytes(path_, forged(bad));
  {
    const auto d = PackedDataset::open(path_);
    EXPECT_EQ(d->dataset().length(3), 5);
    expect_throw_with<InvalidArgument>([&] { d->dataset().sample(2); }, {source_ + ":3: "});
    expect_throw_with<InvalidArgument>([&] { d->batch(1); }, {source_ + ":3: "});
    expect_throw_with<InvalidArgument>(
        [&] { d->dataset().sample(3); },
        {source_ + ":4: sample 3 holds 4 tokens, not the 5 its index says"});
    EXPECT_EQ(d->dataset().sample(4).input_ids, (std::vector<int64_t>{11}));
  }

  // Another source kind has neither options nor an index.
  IndexedDatasetWriter writer(dir_.file("ds"), TokenDType::kInt32);
  for (int i = 0; i < 5; ++i) writer.add_sequence(std::vector<int64_t>(2, i));
  writer.finish();
  write_pack_file(path_, packs_, 8, 1, {"indexed", dir_.file("ds"), 5});
  bad = read_bytes(path_);
  const size_t indexed_options_at = testing::pack_file_header_checksum_at(bad) - 16;
  patch(bad, indexed_options_at, uint64_t{1});
  expect_open_fails(forged(bad), {path_ + ": byte " + std::to_string(indexed_options_at) +
                                  ": JSONL options 1 and an index of 0 entries for a source of "
                                  "kind indexed, which has neither"});
}

TEST_F(HostilePackFile, AnOlderVersionSaysToPackAgain) {
  for (uint64_t version : {uint64_t{1}, uint64_t{2}}) {
    std::string old = good_;
    patch(old, 8, version);
    expect_open_fails(
        old, {path_ + ": byte 8: unsupported pack file version " + std::to_string(version) +
              " (this build reads 3 and 4, which add a checksum of the whole file and a "
              "fingerprint of the source; pack the dataset again)"});
  }
}

}  // namespace
}  // namespace thdpack
