// Pack files (include/thdpack/data/pack_file.hpp): packs of JSONL, mock and indexed sources
// written, reopened and read back as THD rows identical to packing the same samples directly.
// Damaged files are in hostile_pack_file_test.cpp.

#include "thdpack/data/pack_file.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "expect_throw.hpp"
#include "temp_dir.hpp"
#include "test_support.hpp"
#include "thdpack/core/dataset.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/indexed_dataset.hpp"
#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/packing/offline_packing.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack {
namespace {

using I64 = std::vector<int64_t>;
using test_util::expect_throw_with;
using test_util::TempDir;

// Packs the source, writes the pack file, reopens it and checks every pack against pack_samples
// on the same samples.
void round_trip(const TempDir& dir, const PackSource& source, int64_t capacity, int64_t divisor) {
  const auto dataset = open_pack_source(source);
  I64 lengths;
  for (int64_t i = 0; i < dataset->size(); ++i) lengths.push_back(dataset->length(i));
  OfflinePackOptions o;
  o.capacity = capacity;
  o.divisor = divisor;
  o.shuffle_seed = 3;
  const OfflinePacking packing = pack_offline(lengths, o);
  const std::string path = dir.file(source.kind + ".thd");
  write_pack_file(path, packing.packs, capacity, divisor, source);

  const auto packed = PackedDataset::open(path);
  EXPECT_EQ(packed->num_packs(), packing.packs.count());
  EXPECT_EQ(packed->capacity(), capacity);
  EXPECT_EQ(packed->divisor(), divisor);
  EXPECT_EQ(packed->source().kind, source.kind);
  EXPECT_EQ(packed->source().spec, source.spec);
  EXPECT_EQ(packed->source().size, source.size);
  EXPECT_EQ(packed->dataset().size(), dataset->size());
  PackOptions options;
  options.pad_id = 3;
  options.ignore_id = -7;
  for (int64_t p = 0; p < packed->num_packs(); ++p) {
    const auto ids = packed->pack(p);
    ASSERT_EQ(I64(ids.begin(), ids.end()),
              I64(packing.packs.bin(p).begin(), packing.packs.bin(p).end()));
    std::vector<Sample> samples;
    for (int64_t id : ids) samples.push_back(dataset->sample(id));
    std::vector<SampleView> views;
    for (const Sample& s : samples) views.push_back(view_of(s));
    PackOptions expected_options = options;
    expected_options.divisor = divisor;
    expected_options.capacity = capacity;
    const PackedBatch batch = packed->batch(p, options);
    testing::expect_same_pack(batch, pack_samples(views, expected_options));
    EXPECT_EQ(batch.sample_ids, I64(ids.begin(), ids.end()));
    EXPECT_LE(batch.num_rows(), capacity);
  }
  expect_throw_with<InvalidArgument>([&] { packed->pack(packed->num_packs()); }, {"outside"});
}

TEST(PackFile, JsonlSourceRoundTrip) {
  TempDir dir;
  std::string text;
  std::mt19937_64 rng(9);
  for (int i = 0; i < 60; ++i) {
    const int n = 1 + static_cast<int>(rng() % 40);
    std::string ids, extra;
    for (int j = 0; j < n; ++j) {
      if (j > 0) ids += ',';
      ids += std::to_string(2 + (i * 31 + j) % 500);
    }
    if (i % 3 == 1) {
      extra = ",\"loss_mask\":[";
      for (int j = 0; j < n; ++j) extra += std::string(j ? "," : "") + (j >= n / 2 ? "1" : "0");
      extra += "]";
    } else if (i % 3 == 2) {
      extra = ",\"labels\":[";
      for (int j = 0; j < n; ++j) extra += std::string(j ? "," : "") + (j < 2 ? "-100" : "5");
      extra += "]";
    }
    text += "{\"input_ids\":[" + ids + "]" + extra + "}\n";
  }
  const std::string path = dir.write("data.jsonl", text);
  round_trip(dir, {"jsonl", path, 60}, 64, 4);
}

TEST(PackFile, MockSourceRoundTrip) {
  TempDir dir;
  MockConfig c;
  c.type = LengthDistributionType::kUniform;
  c.min_seq_len = 1;
  c.max_seq_len = 100;
  c.size = 300;
  c.seed = 4;
  round_trip(dir, {"mock", to_json(c), 300}, 256, 2);
}

TEST(PackFile, IndexedSourceRoundTrip) {
  TempDir dir;
  const std::string prefix = dir.file("tokens");
  IndexedDatasetWriter writer(prefix, TokenDType::kUint16);
  for (int i = 0; i < 80; ++i) {
    I64 tokens(static_cast<size_t>(1 + i % 23));
    std::iota(tokens.begin(), tokens.end(), int64_t{i});
    writer.add_sequence(tokens);
  }
  writer.finish();
  round_trip(dir, {"indexed", prefix, 80}, 48, 1);
}

}  // namespace
}  // namespace thdpack
