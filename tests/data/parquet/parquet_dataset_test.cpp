// The Parquet reader (thdpack/data/parquet_dataset.hpp): every token of many seeded random
// datasets (several files, every integer width, list and large_list, row groups of any size, empty
// ones included) against what was written; hostile files each refused with one line naming the
// file, row group and row; paths, globs and folders; pack files of Parquet sources.

#include "thdpack/data/parquet_dataset.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "expect_throw.hpp"
#include "parquet_writer.hpp"
#include "temp_dir.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/pack_file.hpp"

namespace thdpack {
namespace {

namespace fs = std::filesystem;
using test_util::expect_throw_with;
using test_util::list_array;
using test_util::ListRow;
using test_util::rows_of;
using test_util::TempDir;
using test_util::TestColumn;
using test_util::write_parquet;

// What one random dataset holds, row by row, across its files.
struct Expected {
  std::vector<std::vector<int64_t>> tokens;
  std::vector<std::vector<int64_t>> side;  // loss mask or labels, when written
};

enum class Side { kNone, kLossMask, kLabels };

std::shared_ptr<arrow::DataType> integer_type(int which) {
  switch (which % 8) {
    case 0:
      return arrow::int8();
    case 1:
      return arrow::int16();
    case 2:
      return arrow::int32();
    case 3:
      return arrow::int64();
    case 4:
      return arrow::uint8();
    case 5:
      return arrow::uint16();
    case 6:
      return arrow::uint32();
    default:
      return arrow::uint64();
  }
}

int64_t largest_token(const arrow::DataType& type) {
  switch (type.id()) {
    case arrow::Type::INT8:
      return 127;
    case arrow::Type::UINT8:
      return 255;
    case arrow::Type::INT16:
      return 32767;
    case arrow::Type::UINT16:
      return 65535;
    case arrow::Type::INT32:
      return 2147483647;
    case arrow::Type::UINT32:
      return 4294967295;
    default:
      return int64_t{1} << 40;  // exact in the double the writer helper goes through
  }
}

// Writes `files` random shards of one schema under `dir`; returns what they hold.
Expected write_random_dataset(const std::string& dir, std::mt19937_64& rng, Side side) {
  const auto type = integer_type(static_cast<int>(rng() % 8));
  const bool large = rng() % 2 == 0;
  const int64_t top = largest_token(*type);
  const int files = 1 + static_cast<int>(rng() % 4);
  Expected all;
  for (int f = 0; f < files; ++f) {
    const int64_t rows = static_cast<int64_t>(rng() % 60);  // a file may hold no row
    std::vector<std::vector<int64_t>> tokens, extra;
    for (int64_t r = 0; r < rows; ++r) {
      const size_t n = 1 + rng() % (rng() % 8 == 0 ? 300 : 20);
      std::vector<int64_t> t(n), e(n);
      for (size_t k = 0; k < n; ++k) {
        t[k] = static_cast<int64_t>(rng() % static_cast<uint64_t>(top + 1));
        e[k] = side == Side::kLabels ? (rng() % 3 == 0 ? -100 : t[k])
                                     : static_cast<int64_t>(rng() % 2);
      }
      tokens.push_back(t);
      extra.push_back(e);
    }
    // The side column first: the reader finds columns by name, not position.
    std::vector<TestColumn> columns;
    if (side == Side::kLossMask)
      columns.push_back({"mask", list_array(rows_of(extra), arrow::boolean())});
    if (side == Side::kLabels)
      columns.push_back({"labels", list_array(rows_of(extra), arrow::int64())});
    columns.push_back({"input_ids", list_array(rows_of(tokens), type, large)});
    std::vector<int64_t> groups;
    for (int64_t left = rows; left > 0 || groups.empty();) {
      const int64_t g = std::min<int64_t>(left, static_cast<int64_t>(rng() % 17));  // 0: empty
      groups.push_back(g);
      left -= g;
    }
    write_parquet(dir + "/part-" + std::to_string(f) + ".parquet", columns, groups);
    all.tokens.insert(all.tokens.end(), tokens.begin(), tokens.end());
    all.side.insert(all.side.end(), extra.begin(), extra.end());
  }
  return all;
}

void expect_sample(const Dataset& d, int64_t i, const Expected& e, Side side) {
  const auto at = static_cast<size_t>(i);
  const Sample s = d.sample(i);
  ASSERT_EQ(s.id, i);
  ASSERT_EQ(d.length(i), static_cast<int64_t>(e.tokens[at].size()));
  ASSERT_EQ(s.input_ids, e.tokens[at]) << d.locate(i);
  if (side == Side::kLabels) {
    ASSERT_EQ(s.labels, e.side[at]);
  }
  if (side == Side::kLossMask) {
    ASSERT_EQ(s.loss_mask, std::vector<float>(e.side[at].begin(), e.side[at].end()));
  }
  if (side == Side::kNone) {
    ASSERT_TRUE(s.loss_mask.empty() && s.labels.empty());
  }
}

TEST(ParquetDataset, EveryTokenOfRandomShardsMatchesWhatWasWritten) {
  ASSERT_TRUE(parquet_supported());
  for (uint64_t seed = 0; seed < 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TempDir dir;
    std::mt19937_64 rng(seed);
    const auto side = static_cast<Side>(seed % 3);
    const Expected e = write_random_dataset(dir.path().string(), rng, side);
    if (e.tokens.empty()) continue;
    ParquetOptions options;
    if (side == Side::kLossMask) options.loss_mask_column = "mask";
    if (side == Side::kLabels) options.labels_column = "labels";
    options.threads = 1 + static_cast<unsigned>(seed % 4);  // row groups read side by side
    const auto d = load_parquet_dataset({dir.path().string()}, options);
    ASSERT_EQ(d->size(), static_cast<int64_t>(e.tokens.size()));
    for (int64_t i = 0; i < d->size(); ++i) expect_sample(*d, i, e, side);
    // Out of order too: the row-group cache must not hand out another group's rows.
    for (int64_t i = d->size() - 1; i >= 0; i -= 3) expect_sample(*d, i, e, side);
    // Many at once, shuffled with repeats, with a cache that keeps one row group or all of them.
    options.cache_bytes = seed % 2 == 0 ? 1 : int64_t{1} << 30;
    const auto again = load_parquet_dataset({dir.path().string()}, options);
    std::vector<int64_t> picks;
    for (int k = 0; k < 3 * d->size(); ++k)
      picks.push_back(static_cast<int64_t>(rng() % d->size()));
    for (int round = 0; round < 2; ++round) {
      const std::vector<Sample> got = again->samples(picks);
      ASSERT_EQ(got.size(), picks.size());
      for (size_t k = 0; k < picks.size(); ++k) {
        const Sample want = d->sample(picks[k]);
        ASSERT_EQ(got[k].id, want.id);
        ASSERT_EQ(got[k].input_ids, want.input_ids);
        ASSERT_EQ(got[k].loss_mask, want.loss_mask);
        ASSERT_EQ(got[k].labels, want.labels);
      }
    }
  }
}

TEST(ParquetDataset, FoldersGlobsAndFilesAreOneDatasetInOrder) {
  TempDir dir;
  write_parquet(dir.file("b.parquet"),
                {{"input_ids", list_array(rows_of({{3}, {4, 4}}), arrow::int32())}});
  write_parquet(dir.file("a.parquet"), {{"input_ids", list_array(rows_of({{1}}), arrow::int32())}});
  dir.write("notes.txt", "not a shard");
  const auto by_folder = load_parquet_dataset({dir.path().string()});
  ASSERT_EQ(by_folder->size(), 3);
  EXPECT_EQ(by_folder->sample(0).input_ids, std::vector<int64_t>{1});
  EXPECT_EQ(by_folder->sample(2).input_ids, (std::vector<int64_t>{4, 4}));
  EXPECT_NE(by_folder->locate(2).find("b.parquet: row group 0, row 1"), std::string::npos);
  const auto by_glob = load_parquet_dataset({dir.file("*.parquet")});
  EXPECT_EQ(by_glob->size(), 3);
  const auto by_files = load_parquet_dataset({dir.file("b.parquet"), dir.file("a.parquet")});
  EXPECT_EQ(by_files->sample(0).input_ids, std::vector<int64_t>{3});
  expect_throw_with<InvalidArgument>(
      [&] {
        load_parquet_dataset({dir.path().string(), dir.file("a.parquet")});
      },
      {"a.parquet", "named twice"});
  expect_throw_with<InvalidArgument>([&] { load_parquet_dataset({dir.file("*.pq")}); },
                                     {"matches no file"});
  expect_throw_with<InvalidArgument>([&] { load_parquet_dataset({dir.file("none.parquet")}); },
                                     {"does not exist"});
}

// One file of `input_ids` rows (and more columns), then the error loading it must give.
void expect_refused(const std::vector<TestColumn>& columns, const std::vector<int64_t>& groups,
                    const ParquetOptions& options, std::initializer_list<std::string> needles) {
  TempDir dir;
  const std::string path = dir.file("bad.parquet");
  write_parquet(path, columns, groups);
  const std::string m =
      expect_throw_with<InvalidArgument>([&] { load_parquet_dataset({path}, options); }, needles);
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
}

TEST(ParquetDataset, HostileValuesNameFileRowGroupAndRow) {
  const auto ids = [](std::vector<ListRow> rows,
                      std::shared_ptr<arrow::DataType> t = arrow::int64()) {
    return TestColumn{"input_ids", list_array(rows, t)};
  };
  const ListRow good{std::vector<double>{1, 2}};
  expect_refused(
      {ids({good, good, {std::vector<double>{5, -3}}})}, {2, 1}, {},
      {"row group 1, row 2", "\"input_ids\"[1] = -3 is below the smallest allowed value 0"});
  expect_refused({ids({good, {std::nullopt}})}, {1, 1}, {}, {"row group 1, row 1", "is null"});
  expect_refused({ids({good, {std::vector<double>{1, 2, 3}, 2}})}, {2}, {},
                 {"row group 0, row 1", "\"input_ids\"[2] is null"});
  expect_refused({ids({good, {std::vector<double>{}}})}, {0, 2}, {},
                 {"row group 1, row 1", "is empty: a sample needs at least one token"});
  expect_refused({ids({{std::vector<double>{9223372036854775808.0}}}, arrow::uint64())}, {1}, {},
                 {"row group 0, row 0", "9223372036854775808 is out of range"});
  ParquetOptions mask;
  mask.loss_mask_column = "mask";
  expect_refused({ids({good}), {"mask", list_array({{std::vector<double>{0, 2}}}, arrow::int8())}},
                 {1}, mask, {"\"mask\"[1] must be 0 or 1, got 2"});
  expect_refused({ids({good}), {"mask", list_array({{std::vector<double>{1}}}, arrow::int8())}},
                 {1}, mask, {"\"mask\" has 1 entries but \"input_ids\" has 2"});
  ParquetOptions labels;
  labels.labels_column = "labels";
  expect_refused(
      {ids({good}), {"labels", list_array({{std::vector<double>{-100, -5}}}, arrow::int16())}}, {1},
      labels, {"\"labels\"[1] = -5", "-100, the ignore id"});
  ParquetOptions both = mask;
  both.labels_column = "labels";
  EXPECT_THROW(load_parquet_dataset({"x.parquet"}, both), InvalidArgument);
}

TEST(ParquetDataset, ReadingRowGroupsSideBySideReportsTheFirstBadRowInFileOrder) {
  // Bad rows in several row groups of several files: whatever thread reads which group first,
  // the error is the one a reader going row by row meets first.
  TempDir dir;
  const ListRow good{std::vector<double>{1, 2}};
  for (int f = 0; f < 3; ++f) {
    std::vector<ListRow> rows(40, good);
    for (size_t r = 3; f > 0 && r < rows.size(); r += 4) {
      rows[r] = {std::vector<double>{7, -1}};  // every row group of files 1 and 2
    }
    rows[37] = {std::vector<double>{}};  // row group 9 of every file
    write_parquet(dir.file("part-" + std::to_string(f) + ".parquet"),
                  {{"input_ids", list_array(rows, arrow::int32())}}, std::vector<int64_t>(10, 4));
  }
  for (unsigned threads = 1; threads <= 6; ++threads) {
    for (int repeat = 0; repeat < 5; ++repeat) {
      ParquetOptions options;
      options.threads = threads;
      const std::string m = expect_throw_with<InvalidArgument>(
          [&] { load_parquet_dataset({dir.path().string()}, options); },
          {"part-0.parquet: row group 9, row 37", "is empty"});
      EXPECT_EQ(m.find("part-1"), std::string::npos) << m;
    }
  }
}

TEST(ParquetDataset, HostileSchemasAreRefusedNamingTheColumn) {
  const ListRow good{std::vector<double>{1, 2}};
  expect_refused({{"input_ids", list_array({good}, arrow::utf8())}}, {1}, {},
                 {"column \"input_ids\" is list<string>", "expected a list of integer token ids"});
  expect_refused({{"input_ids", list_array({good}, arrow::float32())}}, {1}, {},
                 {"column \"input_ids\" is list<float>"});
  ParquetOptions other;
  other.tokens_column = "tokens";
  expect_refused({{"input_ids", list_array({good}, arrow::int32())}}, {1}, other,
                 {"no column \"tokens\"", "its columns are input_ids"});
  TempDir dir;
  write_parquet(dir.file("0.parquet"), {{"input_ids", list_array({good}, arrow::int32())}});
  write_parquet(dir.file("1.parquet"), {{"input_ids", list_array({good}, arrow::int64())}});
  expect_throw_with<InvalidArgument>(
      [&] { load_parquet_dataset({dir.path().string()}); },
      {"1.parquet", "is list<int64> but it is list<int32> in", "0.parquet"});
}

TEST(ParquetDataset, DamagedFilesAreRefusedNamingThem) {
  TempDir dir;
  const std::string path = dir.file("d.parquet");
  write_parquet(path, {{"input_ids", list_array(rows_of({{1, 2, 3}, {4}}), arrow::int32())}});
  const auto size = fs::file_size(path);
  std::string bytes(size, '\0');
  std::ifstream(path, std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(size));
  const auto rewrite = [&](const std::string& content) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
  };
  rewrite(bytes.substr(0, size / 2));  // truncated
  expect_throw_with<InvalidArgument>([&] { load_parquet_dataset({path}); },
                                     {path + ": not a readable Parquet file: "});
  std::string footer = bytes;
  for (size_t k = size - 40; k < size - 8; ++k) footer[k] = static_cast<char>(0xff);
  rewrite(footer);
  expect_throw_with<InvalidArgument>([&] { load_parquet_dataset({path}); }, {path});
  rewrite("");
  expect_throw_with<InvalidArgument>([&] { load_parquet_dataset({path}); },
                                     {path + ": not a readable Parquet file: "});
  // Damaged pages: whatever Arrow makes of them, never a crash, never a silent wrong value.
  for (size_t k = 4; k + 8 < size; k += 7) {
    std::string page = bytes;
    page[k] = static_cast<char>(page[k] ^ 0x5a);
    rewrite(page);
    try {
      const auto d = load_parquet_dataset({path});
      for (int64_t i = 0; i < d->size(); ++i) (void)d->sample(i);
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

TEST(ParquetDataset, EmptyRowGroupsAndEmptyFilesAreFineButNoRowsIsNot) {
  TempDir dir;
  write_parquet(dir.file("0.parquet"), {{"input_ids", list_array({}, arrow::int32())}}, {0, 0});
  write_parquet(dir.file("1.parquet"),
                {{"input_ids", list_array(rows_of({{7}, {8}}), arrow::int32())}}, {0, 1, 0, 1, 0});
  const auto d = load_parquet_dataset({dir.path().string()});
  ASSERT_EQ(d->size(), 2);
  EXPECT_EQ(d->sample(1).input_ids, std::vector<int64_t>{8});
  EXPECT_NE(d->locate(1).find("row group 3, row 1"), std::string::npos) << d->locate(1);
  expect_throw_with<InvalidArgument>([&] { load_parquet_dataset({dir.file("0.parquet")}); },
                                     {"hold no rows"});
}

TEST(ParquetDataset, PackFilesReopenTheirParquetSource) {
  register_parquet_pack_source();
  TempDir dir;
  const std::string path = dir.file("p.parquet");
  write_parquet(path, {{"input_ids", list_array(rows_of({{1, 2}, {3}}), arrow::int32())}});
  const PackSource source{"parquet", parquet_source_spec({path}, {}), 2};
  const OpenedPackSource a = open_pack_source_once(source);
  EXPECT_EQ(a.dataset->size(), 2);
  EXPECT_EQ(a.fingerprint, source_fingerprint(source));
  write_parquet(path, {{"input_ids", list_array(rows_of({{1, 2}, {4, 5}}), arrow::int32())}});
  EXPECT_NE(open_pack_source_once(source).fingerprint, a.fingerprint);
}

}  // namespace
}  // namespace thdpack
