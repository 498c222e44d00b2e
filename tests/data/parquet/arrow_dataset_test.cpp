// Arrow sources (thdpack/data/arrow_dataset.hpp) and Megatron-Bridge packed rows read back
// (TableLayout::kBridgePacked): the same rows as Arrow IPC files (stream and file format), as a
// save_to_disk folder and as an Arrow C stream give the samples the Parquet reader gives; packs
// written by write_bridge_parquet come back as the very samples packed; hostile files are one line
// naming the file, batch and row.

#include <arrow/c/bridge.h>
#include <arrow/io/file.h>
#include <arrow/ipc/writer.h>
#include <arrow/record_batch.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "expect_throw.hpp"
#include "parquet_writer.hpp"
#include "temp_dir.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/arrow_dataset.hpp"
#include "thdpack/data/bridge_parquet.hpp"
#include "thdpack/data/pack_file.hpp"
#include "thdpack/data/parquet_dataset.hpp"
#include "thdpack/packing/offline_packing.hpp"
#include "thdpack/packing/packed_batch.hpp"

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

std::shared_ptr<arrow::RecordBatch> batch_of(const std::vector<TestColumn>& columns, int64_t at,
                                             int64_t n) {
  arrow::FieldVector fields;
  std::vector<std::shared_ptr<arrow::Array>> arrays;
  for (const auto& c : columns) {
    fields.push_back(arrow::field(c.name, c.data->type()));
    arrays.push_back(c.data->Slice(at, n));
  }
  return arrow::RecordBatch::Make(arrow::schema(fields), n, arrays);
}

// Writes `columns` as Arrow IPC (the stream format datasets writes, or the file format) in
// record batches of `batch_rows` rows.
void write_arrow(const std::string& path, const std::vector<TestColumn>& columns,
                 const std::vector<int64_t>& batch_rows, bool file_format = false) {
  const auto schema = batch_of(columns, 0, 0)->schema();
  std::shared_ptr<arrow::io::FileOutputStream> sink;
  test_util::ok(arrow::io::FileOutputStream::Open(path).Value(&sink));
  std::shared_ptr<arrow::ipc::RecordBatchWriter> writer;
  if (file_format) {
    test_util::ok(arrow::ipc::MakeFileWriter(sink, schema).Value(&writer));
  } else {
    test_util::ok(arrow::ipc::MakeStreamWriter(sink, schema).Value(&writer));
  }
  int64_t at = 0;
  for (const int64_t n : batch_rows) {
    test_util::ok(writer->WriteRecordBatch(*batch_of(columns, at, n)));
    at += n;
  }
  test_util::ok(writer->Close());
  test_util::ok(sink->Close());
}

void expect_same_samples(const Dataset& a, const Dataset& b) {
  ASSERT_EQ(a.size(), b.size());
  for (int64_t i = 0; i < a.size(); ++i) {
    const Sample x = a.sample(i), y = b.sample(i);
    EXPECT_EQ(a.length(i), b.length(i)) << i;
    EXPECT_EQ(x.input_ids, y.input_ids) << i;
    EXPECT_EQ(x.loss_mask, y.loss_mask) << i;
    EXPECT_EQ(x.labels, y.labels) << i;
  }
}

// Random rows: tokens of random lengths and a 0/1 mask.
std::vector<TestColumn> random_columns(uint64_t seed, int64_t rows) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int64_t>> tokens, mask;
  for (int64_t r = 0; r < rows; ++r) {
    const auto n = static_cast<size_t>(1 + rng() % 40);
    std::vector<int64_t> t(n), m(n);
    for (size_t k = 0; k < n; ++k) {
      t[k] = static_cast<int64_t>(rng() % 50000);
      m[k] = static_cast<int64_t>(rng() % 2);
    }
    tokens.push_back(t);
    mask.push_back(m);
  }
  return {{"input_ids", list_array(rows_of(tokens), arrow::int32())},
          {"loss_mask", list_array(rows_of(mask), arrow::int8())}};
}

TEST(ArrowDataset, StreamFileFormatFolderAndCStreamGiveTheParquetSamples) {
  TempDir dir;
  ParquetOptions options;
  options.loss_mask_column = "loss_mask";
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const auto columns = random_columns(seed, 37);
    write_parquet(dir.file("p.parquet"), columns, {10, 0, 27});
    const auto parquet = load_parquet_dataset({dir.file("p.parquet")}, options);
    write_arrow(dir.file("s.arrow"), columns, {5, 0, 32});
    expect_same_samples(*load_arrow_dataset({dir.file("s.arrow")}, options), *parquet);
    write_arrow(dir.file("f.arrow"), columns, {37}, true);
    expect_same_samples(*load_arrow_dataset({dir.file("f.arrow")}, options), *parquet);

    // A save_to_disk folder: its files in state.json's order, not sorted by name.
    const fs::path folder = dir.path() / ("saved" + std::to_string(seed));
    fs::create_directories(folder);
    write_arrow((folder / "data-b.arrow").string(),
                {{"input_ids", columns[0].data->Slice(0, 20)},
                 {"loss_mask", columns[1].data->Slice(0, 20)}},
                {20});
    write_arrow(
        (folder / "data-a.arrow").string(),
        {{"input_ids", columns[0].data->Slice(20)}, {"loss_mask", columns[1].data->Slice(20)}},
        {7, 10});
    std::ofstream(folder / "state.json")
        << R"({"_data_files": [{"filename": "data-b.arrow"}, {"filename": "data-a.arrow"}]})";
    expect_same_samples(*load_arrow_dataset({folder.string()}, options), *parquet);

    // The Arrow C stream of the same rows (what a pyarrow Table hands over).
    std::vector<std::shared_ptr<arrow::RecordBatch>> batches{batch_of(columns, 0, 30),
                                                             batch_of(columns, 30, 7)};
    auto reader = arrow::RecordBatchReader::Make(batches).ValueOrDie();
    ArrowArrayStream stream;
    test_util::ok(arrow::ExportRecordBatchReader(reader, &stream));
    expect_same_samples(*load_arrow_stream_dataset(&stream, options, "table"), *parquet);
  }
}

TEST(ArrowDataset, HostileFilesAreOneLineNamingFileBatchAndRow) {
  TempDir dir;
  const std::string path = dir.file("h.arrow");
  const ListRow good{std::vector<double>{1, 2}};
  write_arrow(
      path,
      {{"input_ids", list_array({good, good, {std::vector<double>{1, 2, 3}, 1}}, arrow::int64())}},
      {2, 1});
  expect_throw_with<InvalidArgument>([&] { load_arrow_dataset({path}); },
                                     {path, "record batch 1, row 2", "\"input_ids\"[1] is null"});
  write_arrow(path, {{"input_ids", list_array({good, {std::nullopt}}, arrow::int64())}}, {2});
  expect_throw_with<InvalidArgument>([&] { load_arrow_dataset({path}); },
                                     {path, "record batch 0, row 1", "is null"});
  write_arrow(path, {{"input_ids", list_array({good}, arrow::utf8())}}, {1});
  expect_throw_with<InvalidArgument>([&] { load_arrow_dataset({path}); },
                                     {path, "column \"input_ids\" is list<string>"});
  write_arrow(path, {{"ids", list_array({good}, arrow::int32())}}, {1});
  expect_throw_with<InvalidArgument>([&] { load_arrow_dataset({path}); },
                                     {path, "no column \"input_ids\"", "its columns are ids"});

  // Truncated anywhere, between batches included: refused, never a shorter dataset.
  write_arrow(path, {{"input_ids", list_array(rows_of({{1, 2, 3}, {4}, {5, 6}}), arrow::int32())}},
              {1, 1, 1});
  const auto size = fs::file_size(path);
  std::string bytes(size, '\0');
  std::ifstream(path, std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(size));
  for (size_t cut = 0; cut < size; cut += 5) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes.substr(0, cut);
    expect_throw_with<InvalidArgument>([&] { load_arrow_dataset({path}); }, {path});
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes.substr(0, size - 8);
  expect_throw_with<InvalidArgument>([&] { load_arrow_dataset({path}); },
                                     {path, "end-of-stream marker"});
  // Damaged bytes: an error naming the file or the values written, never a crash.
  for (size_t k = 0; k + 8 < size; k += 3) {
    std::string damaged = bytes;
    damaged[k] = static_cast<char>(damaged[k] ^ 0x5a);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << damaged;
    try {
      const auto d = load_arrow_dataset({path});
      for (int64_t i = 0; i < d->size(); ++i) (void)d->sample(i);
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }

  const fs::path dict = dir.path() / "dict";
  fs::create_directories(dict / "train");
  std::ofstream(dict / "dataset_dict.json") << R"({"splits": ["train"]})";
  expect_throw_with<InvalidArgument>([&] { load_arrow_dataset({dict.string()}); },
                                     {"DatasetDict", "train"});
}

TEST(ArrowDataset, PackFilesReopenTheirArrowSource) {
  register_arrow_pack_source();
  TempDir dir;
  const std::string path = dir.file("a.arrow");
  write_arrow(path, {{"input_ids", list_array(rows_of({{1, 2}, {3}}), arrow::int32())}}, {2});
  const PackSource source{"arrow", arrow_source_spec({path}, {}), 2};
  const OpenedPackSource a = open_pack_source_once(source);
  EXPECT_EQ(a.dataset->size(), 2);
  EXPECT_EQ(a.fingerprint, source_fingerprint(source));
  write_arrow(path, {{"input_ids", list_array(rows_of({{1, 2}, {4}}), arrow::int32())}}, {2});
  EXPECT_NE(open_pack_source_once(source).fingerprint, a.fingerprint);
}

// A JSONL-like dataset of fixed samples, for write_bridge_parquet.
class FixedDataset final : public Dataset {
 public:
  explicit FixedDataset(std::vector<Sample> samples) : samples_(std::move(samples)) {}
  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  int64_t length(int64_t i) const override {
    return static_cast<int64_t>(samples_[static_cast<size_t>(i)].input_ids.size());
  }
  Sample sample(int64_t i) const override { return samples_[static_cast<size_t>(i)]; }
  std::string describe() const override { return "fixed"; }

 private:
  std::vector<Sample> samples_;
};

// The packs of `samples` at `capacity` tokens (best-fit decreasing).
Bins packs_of(const std::vector<Sample>& samples, int64_t capacity) {
  std::vector<int64_t> lengths;
  for (const Sample& s : samples) lengths.push_back(static_cast<int64_t>(s.input_ids.size()));
  OfflinePackOptions options;
  options.capacity = capacity;
  return pack_offline(lengths, options).packs;
}

TEST(BridgePackedRows, PacksWrittenComeBackAsTheSamplesPacked) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<Sample> samples;
    for (int64_t i = 0; i < 60; ++i) {
      Sample s;
      s.id = i;
      const auto n = static_cast<size_t>(1 + rng() % 30);
      for (size_t k = 0; k < n; ++k) s.input_ids.push_back(static_cast<int64_t>(rng() % 32000));
      if (seed % 2 == 0) {  // a prompt then a response, as SFT data
        const size_t prompt = rng() % n;
        for (size_t k = 0; k < n; ++k) s.loss_mask.push_back(k >= prompt ? 1.0f : 0.0f);
      }
      samples.push_back(s);
    }
    const FixedDataset source(samples);
    const Bins packs = packs_of(samples, 64);
    TempDir dir;
    BridgeParquetOptions bridge;
    bridge.packs_per_shard = 7;
    bridge.packs_per_row_group = 3;
    write_bridge_parquet(source, packs, dir.file("out"), bridge);
    for (const auto& entry : std::filesystem::directory_iterator(dir.file("out"))) {
      EXPECT_TRUE(entry.path().filename().string().starts_with("shard-")) << entry.path();
    }

    ParquetOptions options;
    options.layout = TableLayout::kBridgePacked;
    options.loss_mask_column = "loss_mask";
    const auto back = load_parquet_dataset({dir.file("out")}, options);
    // Row p holds pack p's samples in order: sample ids of the read-back dataset run through them.
    int64_t i = 0;
    for (int64_t p = 0; p < packs.count(); ++p) {
      for (const int64_t id : packs.bin(p)) {
        const Sample& want = samples[static_cast<size_t>(id)];
        const Sample got = back->sample(i);
        ASSERT_EQ(got.input_ids, want.input_ids) << "seed " << seed << " sample " << i;
        EXPECT_EQ(back->length(i), static_cast<int64_t>(want.input_ids.size()));
        // What training sees is equal: the labels and weights of each position.
        const SampleView a = view_of(want), b = view_of(got);
        const PackedBatch x = pack_samples(std::span<const SampleView>(&a, 1), PackOptions{});
        const PackedBatch y = pack_samples(std::span<const SampleView>(&b, 1), PackOptions{});
        EXPECT_EQ(x.labels, y.labels);
        EXPECT_EQ(x.loss_mask, y.loss_mask);
        ++i;
      }
    }
    EXPECT_EQ(i, back->size());
  }
}

TEST(BridgePackedRows, WhatTheFormatCannotHoldIsRefusedAndNoShardIsLeft) {
  // Many row groups, the bad sample in a late one: the row group that meets it is built on
  // another thread while the writer encodes the one before, and its error still comes out.
  const auto refused = [](const std::vector<Sample>& samples, const std::string& needle) {
    const Bins packs = packs_of(samples, 8);
    TempDir dir;
    BridgeParquetOptions bridge;
    bridge.packs_per_row_group = 2;
    const FixedDataset source(samples);
    const auto open_files = [] {
      return std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                           std::filesystem::directory_iterator());
    };
    const auto before = open_files();
    expect_throw_with<InvalidArgument>(
        [&] { write_bridge_parquet(source, packs, dir.file("out"), bridge); }, {needle});
    EXPECT_EQ(open_files(), before) << "a descriptor was left open";
    for (const auto& entry : std::filesystem::directory_iterator(dir.file("out"))) {
      ADD_FAILURE() << "left behind: " << entry.path();
    }
  };
  std::vector<Sample> samples;
  for (int64_t i = 0; i < 40; ++i) {
    Sample s;
    s.id = i;
    s.input_ids = {1, 2, 3, 4};
    samples.push_back(s);
  }
  std::vector<Sample> wide = samples;
  wide[37].input_ids[2] = int64_t{1} << 31;
  refused(wide, "has token id 2147483648, past the int32 of Megatron-Bridge's input_ids");
  std::vector<Sample> labelled = samples;
  labelled[33].labels = {5, 6, 7, 8};  // position 0 trains on 6, not its next token 2
  refused(labelled, "not its next token; Megatron-Bridge's packed Parquet has no labels column");
}

TEST(BridgePackedRows, BadSampleStartsNameFileAndRow) {
  TempDir dir;
  ParquetOptions options;
  options.layout = TableLayout::kBridgePacked;
  options.loss_mask_column = "loss_mask";
  const auto write = [&](std::vector<int64_t> starts) {
    write_parquet(dir.file("b.parquet"),
                  {{"input_ids", list_array(rows_of({{1, 2, 3, 4}}), arrow::int32())},
                   {"loss_mask", list_array(rows_of({{1, 1, 1, 0}}), arrow::int8())},
                   {"seq_start_id", list_array(rows_of({starts}), arrow::int32())}});
  };
  write({0, 2});
  EXPECT_EQ(load_parquet_dataset({dir.file("b.parquet")}, options)->size(), 2);
  write({1, 2});
  expect_throw_with<InvalidArgument>(
      [&] { load_parquet_dataset({dir.file("b.parquet")}, options); },
      {"b.parquet: row group 0, row 0", "\"seq_start_id\" must start with 0"});
  write({0, 3, 2});
  expect_throw_with<InvalidArgument>(
      [&] { load_parquet_dataset({dir.file("b.parquet")}, options); },
      {"row group 0, row 0", "\"seq_start_id\"[2] = 2 must be above"});
  write({0, 4});
  expect_throw_with<InvalidArgument>(
      [&] { load_parquet_dataset({dir.file("b.parquet")}, options); },
      {"\"seq_start_id\"[1] = 4", "below the row's 4 tokens"});
  write({});
  expect_throw_with<InvalidArgument>(
      [&] { load_parquet_dataset({dir.file("b.parquet")}, options); }, {"an empty list"});
  options.seq_start_column = "starts";
  write({0});
  expect_throw_with<InvalidArgument>(
      [&] { load_parquet_dataset({dir.file("b.parquet")}, options); }, {"no column \"starts\""});
}

}  // namespace
}  // namespace thdpack
