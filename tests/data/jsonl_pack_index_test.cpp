// Pack files of JSONL sources (include/thdpack/data/pack_file.hpp, version 4): the index of the
// source's lines they carry, the JSONL options they record, reopening without reading any line,
// samples equal to the eager reader's, and version-3 files read as before. Damaged indexes are in
// hostile_pack_file_test.cpp.

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "data/jsonl_index.hpp"
#include "expect_throw.hpp"
#include "megatron_index.hpp"
#include "pack_file_seal.hpp"
#include "temp_dir.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/jsonl_dataset.hpp"
#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/data/pack_file.hpp"
#include "thdpack/packing/offline_packing.hpp"

namespace thdpack {
namespace {

using I64 = std::vector<int64_t>;
using test_util::expect_throw_with;
using test_util::TempDir;

void expect_same_sample(const Sample& got, const Sample& want) {
  EXPECT_EQ(got.id, want.id);
  EXPECT_EQ(got.input_ids, want.input_ids);
  EXPECT_EQ(got.loss_mask, want.loss_mask);
  EXPECT_EQ(got.labels, want.labels);
  EXPECT_EQ(got.labels_shifted, want.labels_shifted);
}

// Every sample, length and location of `got` is the one of `want`.
void expect_same_dataset(const Dataset& got, const Dataset& want) {
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(got.describe(), want.describe());
  for (int64_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want.locate(i));
    EXPECT_EQ(got.length(i), want.length(i));
    EXPECT_EQ(got.locate(i), want.locate(i));
    expect_same_sample(got.sample(i), want.sample(i));
  }
}

std::string int_list(const I64& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(values[i]);
  }
  out += ']';
  return out;
}

// A JSONL file of seeded random samples: masks, labels (with ignored positions), unknown keys when
// `unknown_keys`, blank lines, CRLF endings and spaces, the last line with or without '\n'.
std::string random_jsonl(uint64_t seed, bool unknown_keys, int samples) {
  std::mt19937_64 rng(seed);
  std::string text = seed % 3 == 0 ? "\xEF\xBB\xBF" : "";  // a UTF-8 BOM now and then
  for (int i = 0; i < samples; ++i) {
    while (i > 0 && rng() % 6 == 0) text += std::string(rng() % 2 ? "\n" : "  \t\n");
    I64 ids(1 + rng() % 70);
    for (auto& t : ids) t = static_cast<int64_t>(rng() % 100000);
    std::string line = "{\"input_ids\": ";
    line += int_list(ids);
    switch (rng() % 3) {
      case 0: {
        I64 mask(ids.size());
        for (auto& m : mask) m = static_cast<int64_t>(rng() % 2);
        line += ",\"loss_mask\":";
        line += int_list(mask);
        break;
      }
      case 1: {
        I64 labels = ids;
        for (auto& l : labels) l = rng() % 3 == 0 ? -100 : l;
        line += ", \"labels\":";
        line += int_list(labels);
        break;
      }
      default:
        break;
    }
    if (unknown_keys && rng() % 2 == 0) line += ",\"text\":\"h\\u00e9llo {\\\"x\\\":1}\"";
    line += "}";
    if (rng() % 5 == 0) line += "\r";
    text += line;
    if (i + 1 < samples || rng() % 2 == 0) text += "\n";
  }
  return text;
}

// Packs `source` read with `options` and writes a version-4 pack file with its index; returns its
// path.
std::string pack_with_index(const TempDir& dir, const PackSource& source,
                            const JsonlOptions& options, const std::string& name) {
  const OpenedPackSource opened = open_pack_source_once(source, options);
  I64 lengths;
  for (int64_t i = 0; i < opened.dataset->size(); ++i) lengths.push_back(opened.dataset->length(i));
  OfflinePackOptions o;
  o.capacity = 256;
  o.shuffle_seed = 5;
  const OfflinePacking packing = pack_offline(lengths, o);
  const std::string path = dir.file(name);
  write_pack_file(path, packing.packs, 256, 1, source, opened.fingerprint, *opened.dataset);
  return path;
}

TEST(JsonlPackIndex, ReopenedSamplesAreTheEagerReadersOnRandomFiles) {
  TempDir dir;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    SCOPED_TRACE(seed);
    JsonlOptions options;
    options.ignore_unknown_keys = seed % 2 == 0;
    options.labels_shifted = seed % 4 == 3;
    const int samples = 20 + static_cast<int>(seed * 37 % 150);
    const std::string jsonl = dir.write("data" + std::to_string(seed) + ".jsonl",
                                        random_jsonl(seed, options.ignore_unknown_keys, samples));
    const PackSource source{"jsonl", jsonl, samples};
    const std::string path = pack_with_index(dir, source, options, "p.pack");
    const auto packed = PackedDataset::open(path);
    const auto eager = load_jsonl_dataset(jsonl, options);
    expect_same_dataset(packed->dataset(), *eager);
    // The index read back is the one the eager reader built.
    const detail::JsonlIndex* got = detail::jsonl_index_of(packed->dataset());
    const detail::JsonlIndex* want = detail::jsonl_index_of(*eager);
    ASSERT_NE(got, nullptr);
    ASSERT_NE(want, nullptr);
    EXPECT_EQ(got->offsets, want->offsets);
    EXPECT_EQ(got->bytes, want->bytes);
    EXPECT_EQ(got->lines, want->lines);
    EXPECT_EQ(got->lengths, want->lengths);
    EXPECT_EQ(got->options.ignore_unknown_keys, options.ignore_unknown_keys);
    EXPECT_EQ(got->options.labels_shifted, options.labels_shifted);
    // Whole packs too, as THD rows.
    for (int64_t p = 0; p < packed->num_packs(); ++p) {
      const PackedBatch batch = packed->batch(p);
      EXPECT_EQ(batch.sample_ids, I64(packed->pack(p).begin(), packed->pack(p).end()));
    }
  }
}

// Opening reads no line of the source: the source here holds lines that are not samples (never
// indexed), which reading it whole refuses, yet its fingerprint is what the file records.
TEST(JsonlPackIndex, OpeningReadsNoLine) {
  TempDir dir;
  const std::string good = "{\"input_ids\":[1,2]}\n      \n{\"input_ids\":[3]}\n";
  const std::string bad = "{\"input_ids\":[1,2]}\nnot{a}\n{\"input_ids\":[3]}\nnot a sample\n";
  const std::string indexed = dir.write("indexed.jsonl", good);
  const auto read = load_jsonl_dataset(indexed);
  const std::string jsonl = dir.write("data.jsonl", bad);
  const PackSource source{"jsonl", jsonl, 2};
  Bins packs;
  packs.offsets = {0, 2};
  packs.items = {1, 0};
  const std::string path = dir.file("p.pack");
  write_pack_file(path, packs, 16, 1, source, source_fingerprint(source), *read);

  const auto packed = PackedDataset::open(path);
  EXPECT_EQ(packed->dataset().size(), 2);
  EXPECT_EQ(packed->dataset().length(0), 2);
  EXPECT_EQ(packed->dataset().sample(1).input_ids, I64{3});
  EXPECT_EQ(packed->dataset().locate(1), jsonl + ":3");
  EXPECT_EQ(packed->batch(0).tokens, (I64{3, 1, 2}));
  expect_throw_with<InvalidArgument>([&] { load_jsonl_dataset(jsonl); }, {jsonl + ":2: "});
  // The version-3 file of the same packs reads the source whole, as before.
  testing::write_bytes(path, testing::as_version_3(testing::read_bytes(path)));
  expect_throw_with<InvalidArgument>([&] { PackedDataset::open(path); },
                                     {path + ": cannot open its jsonl source: " + jsonl + ":2: "});
}

TEST(JsonlPackIndex, Version3FilesStillOpen) {
  TempDir dir;
  const std::string jsonl = dir.write("data.jsonl", random_jsonl(11, false, 90));
  const std::string path = pack_with_index(dir, {"jsonl", jsonl, 90}, {}, "p.pack");
  const std::string v4 = testing::read_bytes(path);
  const std::string v3 = testing::as_version_3(v4);
  EXPECT_LT(v3.size(), v4.size());
  testing::write_bytes(path, v3);
  const auto packed = PackedDataset::open(path);
  expect_same_dataset(packed->dataset(), *load_jsonl_dataset(jsonl));
  // Its source changed: the message of version 3.
  dir.write("data.jsonl", random_jsonl(12, false, 90));
  expect_throw_with<InvalidArgument>(
      [&] { PackedDataset::open(path); },
      {path + ": its source " + jsonl + " changed since it was packed (same 90 samples"});
}

// The options a JSONL source was read with are recorded: a file read with ignore_unknown_keys
// reopens (a version-3 file reopened it with the defaults, and refused it), and shifted labels stay
// shifted.
TEST(JsonlPackIndex, TheJsonlOptionsAreRecorded) {
  TempDir dir;
  const std::string jsonl =
      dir.write("data.jsonl",
                "{\"input_ids\":[1,2,3],\"labels\":[2,3,-100],\"id\":\"a\"}\n"
                "{\"input_ids\":[4,5],\"labels\":[5,-100],\"source\":{\"x\":[1]}}\n");
  JsonlOptions options;
  options.ignore_unknown_keys = true;
  options.labels_shifted = true;
  const std::string path = pack_with_index(dir, {"jsonl", jsonl, 2}, options, "p.pack");
  const auto packed = PackedDataset::open(path);
  expect_same_dataset(packed->dataset(), *load_jsonl_dataset(jsonl, options));
  EXPECT_TRUE(packed->dataset().sample(0).labels_shifted);
  testing::write_bytes(path, testing::as_version_3(testing::read_bytes(path)));
  expect_throw_with<InvalidArgument>([&] { PackedDataset::open(path); },
                                     {jsonl + ":1: unknown key \"id\""});
}

TEST(JsonlPackIndex, SamplesReadFromSeveralThreads) {
  TempDir dir;
  const std::string jsonl = dir.write("data.jsonl", random_jsonl(21, false, 400));
  const auto packed =
      PackedDataset::open(pack_with_index(dir, {"jsonl", jsonl, 400}, {}, "p.pack"));
  const auto eager = load_jsonl_dataset(jsonl);
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        for (int64_t k = 0; k < 400; ++k) {
          const int64_t i = (k * (2 * t + 1) + 17 * round) % 400;
          const Sample got = packed->dataset().sample(i);
          const Sample want = eager->sample(i);
          if (got.input_ids != want.input_ids || got.loss_mask != want.loss_mask ||
              got.labels != want.labels || got.id != i) {
            ++mismatches[static_cast<size_t>(t)];
          }
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

// Written without the dataset read, a JSONL pack file has no index and reads its source whole on
// open; a dataset that is not the source's JSONL dataset is refused.
TEST(JsonlPackIndex, WithoutAnIndex) {
  TempDir dir;
  const std::string jsonl = dir.write("data.jsonl", random_jsonl(31, false, 50));
  const PackSource source{"jsonl", jsonl, 50};
  Bins packs;
  packs.offsets = {0, 50};
  for (int64_t i = 0; i < 50; ++i) packs.items.push_back(i);
  const std::string path = dir.file("p.pack");
  write_pack_file(path, packs, 1 << 20, 1, source, source_fingerprint(source));
  const std::string bytes = testing::read_bytes(path);
  const size_t entries_at = testing::pack_file_header_checksum_at(bytes) - 8;
  EXPECT_EQ(bytes.substr(entries_at, 8), std::string(8, '\0'));
  expect_same_dataset(PackedDataset::open(path)->dataset(), *load_jsonl_dataset(jsonl));

  MockConfig config;
  config.type = LengthDistributionType::kUniform;
  config.min_seq_len = 1;
  config.max_seq_len = 10;
  config.size = 50;
  const auto mock = make_mock_dataset(config);
  expect_throw_with<InvalidArgument>(
      [&] { write_pack_file(path, packs, 1 << 20, 1, source, source_fingerprint(source), *mock); },
      {"write_pack_file: the dataset of a jsonl source must be one that load_jsonl_dataset"});
  const auto other = load_jsonl_dataset(dir.write("other.jsonl", "{\"input_ids\":[1]}\n"));
  expect_throw_with<InvalidArgument>(
      [&] { write_pack_file(path, packs, 1 << 20, 1, source, source_fingerprint(source), *other); },
      {"write_pack_file: the JSONL dataset has 1 samples but the source says 50"});
}

}  // namespace
}  // namespace thdpack
