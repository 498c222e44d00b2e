// Megatron indexed datasets (include/thdpack/data/indexed_dataset.hpp): writer -> reader round
// trips for every dtype, the byte-exact file format against files built by hand, multimodal
// indexes, blends (Megatron's build_blending_indices, reimplemented here) and data paths.

#include "thdpack/data/indexed_dataset.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "expect_throw.hpp"
#include "megatron_index.hpp"
#include "temp_dir.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

using test_util::expect_throw_with;
using test_util::TempDir;
using testing::MegatronIndex;
using testing::put;
using testing::read_bytes;
using testing::without_seal;
using testing::write_bytes;

constexpr TokenDType kAllDtypes[] = {TokenDType::kUint8,   TokenDType::kInt8,  TokenDType::kInt16,
                                     TokenDType::kInt32,   TokenDType::kInt64, TokenDType::kFloat64,
                                     TokenDType::kFloat32, TokenDType::kUint16};

// Tokens that use the dtype's whole range, including its extremes.
std::vector<std::vector<int64_t>> tokens_for(TokenDType dtype) {
  // Token ids are >= 0: each dtype from 0 to its largest id.
  int64_t lo = 0, hi = 0;
  switch (dtype) {
    case TokenDType::kUint8:
      lo = 0, hi = 255;
      break;
    case TokenDType::kInt8:
      lo = 0, hi = 127;
      break;
    case TokenDType::kInt16:
      lo = 0, hi = 32767;
      break;
    case TokenDType::kUint16:
      lo = 0, hi = 65535;
      break;
    case TokenDType::kInt32:
      lo = 0, hi = std::numeric_limits<int32_t>::max();
      break;
    case TokenDType::kInt64:
      lo = 0, hi = std::numeric_limits<int64_t>::max();
      break;
    case TokenDType::kFloat32:
      lo = 0, hi = int64_t{1} << 24;  // integers a float holds exactly
      break;
    case TokenDType::kFloat64:
      lo = 0, hi = int64_t{1} << 53;
      break;
  }
  return {{lo, hi, 0, 1}, {7}, {hi, hi - 1, lo + 1, lo, 5, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}};
}

std::string dataset_of(const TempDir& dir, TokenDType dtype,
                       const std::vector<std::vector<int64_t>>& sequences) {
  const std::string prefix = dir.file(token_dtype_name(dtype));
  IndexedDatasetWriter writer(prefix, dtype);
  for (const auto& s : sequences) writer.add_sequence(s);
  writer.finish();
  return prefix;
}

int64_t file_size(const std::string& path) {
  return static_cast<int64_t>(std::filesystem::file_size(path));
}

// ---------------------------------------------------------------------------------------------
// dtypes

TEST(TokenDType, CodesSizesAndNamesAreMegatrons) {
  const std::vector<std::tuple<TokenDType, int, int, std::string>> expected = {
      {TokenDType::kUint8, 1, 1, "uint8"},     {TokenDType::kInt8, 2, 1, "int8"},
      {TokenDType::kInt16, 3, 2, "int16"},     {TokenDType::kInt32, 4, 4, "int32"},
      {TokenDType::kInt64, 5, 8, "int64"},     {TokenDType::kFloat64, 6, 8, "float64"},
      {TokenDType::kFloat32, 7, 4, "float32"}, {TokenDType::kUint16, 8, 2, "uint16"}};
  for (const auto& [dtype, code, size, name] : expected) {
    EXPECT_EQ(static_cast<int>(dtype), code) << name;
    EXPECT_EQ(token_size(dtype), size) << name;
    EXPECT_EQ(token_dtype_name(dtype), name);
    EXPECT_EQ(token_dtype_from_name(name), dtype);
  }
  expect_throw_with<InvalidArgument>([] { token_dtype_from_name("bfloat16"); },
                                     {"'bfloat16'", "uint16"});
}

// ---------------------------------------------------------------------------------------------
// Writer -> reader round trips

class IndexedRoundTrip : public ::testing::TestWithParam<TokenDType> {};

TEST_P(IndexedRoundTrip, TokensLengthsPointersAndDocuments) {
  const TokenDType dtype = GetParam();
  TempDir dir;
  const auto sequences = tokens_for(dtype);
  const std::string prefix = dataset_of(dir, dtype, sequences);
  const auto d = IndexedDataset::open(prefix);
  ASSERT_EQ(d->size(), static_cast<int64_t>(sequences.size()));
  EXPECT_EQ(d->dtype(), dtype);
  EXPECT_EQ(d->prefix(), prefix);
  const int64_t item = token_size(dtype);
  int64_t at = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const auto n = static_cast<int64_t>(sequences[i].size());
    EXPECT_EQ(d->length(static_cast<int64_t>(i)), n);
    EXPECT_EQ(d->lengths()[i], n);
    EXPECT_EQ(d->pointer(static_cast<int64_t>(i)), at) << "sequence " << i;
    const Sample s = d->sample(static_cast<int64_t>(i));
    EXPECT_EQ(s.id, static_cast<int64_t>(i));
    EXPECT_EQ(s.input_ids, sequences[i]) << token_dtype_name(dtype) << " sequence " << i;
    EXPECT_TRUE(s.loss_mask.empty());
    EXPECT_TRUE(s.labels.empty());
    at += n * item;
  }
  EXPECT_EQ(file_size(prefix + ".bin"), at);
  // Without end_document every sequence is its own document.
  EXPECT_EQ(std::vector<int64_t>(d->document_indices().begin(), d->document_indices().end()),
            (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(d->describe(),
            "indexed " + prefix + " (4 sequences, 4 documents, " + token_dtype_name(dtype) + ")");
  expect_throw_with<InvalidArgument>([&] { d->length(4); }, {"sequence 4", "[0, 4)", prefix});
  expect_throw_with<InvalidArgument>([&] { d->sample(-1); }, {"sequence -1", prefix});
  expect_throw_with<InvalidArgument>([&] { d->pointer(4); }, {"sequence 4"});
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, IndexedRoundTrip, ::testing::ValuesIn(kAllDtypes),
                         [](const ::testing::TestParamInfo<TokenDType>& info) {
                           return token_dtype_name(info.param);
                         });

TEST(IndexedWriter, TokensThatDoNotFitTheDtypeAreRejected) {
  TempDir dir;
  for (TokenDType dtype : kAllDtypes) {
    if (dtype == TokenDType::kInt64) continue;  // every token fits
    SCOPED_TRACE(token_dtype_name(dtype));
    const std::string prefix = dir.file(token_dtype_name(dtype));
    IndexedDatasetWriter writer(prefix, dtype);
    // One past each end of the range tokens_for() uses: for float dtypes, the first integers
    // without an exact float (2^24 + 1, 2^53 + 1).
    const auto extremes = tokens_for(dtype)[0];  // {0, hi, 0, 1}
    expect_throw_with<InvalidArgument>(
        [&] {
          writer.add_sequence(std::vector<int64_t>{1, extremes[1] + 1});
        },
        {std::to_string(extremes[1] + 1), token_dtype_name(dtype)});
    expect_throw_with<InvalidArgument>(
        [&] {
          writer.add_sequence(std::vector<int64_t>{1, -1});
        },
        {"token 1 of the sequence is -1", "token ids are >= 0"});
    // Nothing of a rejected sequence was written.
    writer.add_sequence(std::vector<int64_t>{1});
    writer.finish();
    const auto d = IndexedDataset::open(prefix);
    ASSERT_EQ(d->size(), 1);
    EXPECT_EQ(d->sample(0).input_ids, std::vector<int64_t>{1});
  }
}

TEST(IndexedWriter, EndDocumentGroupsSequences) {
  TempDir dir;
  const std::string prefix = dir.file("docs");
  IndexedDatasetWriter writer(prefix, TokenDType::kInt32);
  writer.add_sequence(std::vector<int64_t>{1, 2});
  writer.add_sequence(std::vector<int64_t>{3});
  writer.end_document();  // document 0: sequences 0, 1
  writer.add_sequence(std::vector<int64_t>{4});
  writer.end_document();  // document 1: sequence 2
  writer.add_sequence(std::vector<int64_t>{5, 6, 7});
  writer.add_sequence(std::vector<int64_t>{8});  // left open: finish closes it
  writer.finish();
  const auto d = IndexedDataset::open(prefix);
  EXPECT_EQ(std::vector<int64_t>(d->document_indices().begin(), d->document_indices().end()),
            (std::vector<int64_t>{0, 2, 3, 5}));
  EXPECT_EQ(d->describe(), "indexed " + prefix + " (5 sequences, 3 documents, int32)");
  EXPECT_EQ(d->sample(3).input_ids, (std::vector<int64_t>{5, 6, 7}));
}

TEST(IndexedWriter, ClosedLastDocumentIsNotRepeated) {
  TempDir dir;
  const std::string prefix = dir.file("closed");
  IndexedDatasetWriter writer(prefix, TokenDType::kUint16);
  writer.add_sequence(std::vector<int64_t>{1});
  writer.add_sequence(std::vector<int64_t>{2});
  writer.end_document();
  writer.finish();
  const auto d = IndexedDataset::open(prefix);
  EXPECT_EQ(std::vector<int64_t>(d->document_indices().begin(), d->document_indices().end()),
            (std::vector<int64_t>{0, 2}));
}

TEST(IndexedWriter, EmptyDocumentsAreKeptAsMegatronWritesThem) {
  // Megatron's add_document for a record without tokens repeats the last document index.
  TempDir dir;
  const std::string prefix = dir.file("empty_docs");
  IndexedDatasetWriter writer(prefix, TokenDType::kInt32);
  writer.add_sequence(std::vector<int64_t>{1});
  writer.end_document();
  writer.end_document();
  writer.add_sequence(std::vector<int64_t>{2});
  writer.end_document();
  writer.finish();
  const auto d = IndexedDataset::open(prefix);
  EXPECT_EQ(std::vector<int64_t>(d->document_indices().begin(), d->document_indices().end()),
            (std::vector<int64_t>{0, 1, 1, 2}));
}

TEST(IndexedWriter, NoSequencesGivesAnEmptyDataset) {
  TempDir dir;
  const std::string prefix = dir.file("none");
  IndexedDatasetWriter(prefix, TokenDType::kInt32).finish();
  EXPECT_EQ(without_seal(read_bytes(prefix + ".idx")), MegatronIndex::of({}, 4, 4).bytes());
  EXPECT_EQ(file_size(prefix + ".bin"), 0);
  const auto d = IndexedDataset::open(prefix);
  EXPECT_EQ(d->size(), 0);
  EXPECT_EQ(std::vector<int64_t>(d->document_indices().begin(), d->document_indices().end()),
            std::vector<int64_t>{0});
}

TEST(IndexedWriter, LengthOnlySequencesAreSparseZeros) {
  TempDir dir;
  const std::string prefix = dir.file("sparse");
  IndexedDatasetWriter writer(prefix, TokenDType::kInt32);
  writer.add_length_only(3);
  writer.add_sequence(std::vector<int64_t>{7, 8});
  writer.add_length_only(100000);
  writer.add_sequence(std::vector<int64_t>{9});
  writer.add_length_only(5);  // a hole at the very end: finish() must extend .bin
  writer.finish();
  EXPECT_EQ(file_size(prefix + ".bin"), (3 + 2 + 100000 + 1 + 5) * 4);
  const auto d = IndexedDataset::open(prefix);
  ASSERT_EQ(d->size(), 5);
  EXPECT_EQ(std::vector<int32_t>(d->lengths().begin(), d->lengths().end()),
            (std::vector<int32_t>{3, 2, 100000, 1, 5}));
  EXPECT_EQ(d->sample(0).input_ids, std::vector<int64_t>(3, 0));
  EXPECT_EQ(d->sample(1).input_ids, (std::vector<int64_t>{7, 8}));
  EXPECT_EQ(d->sample(2).input_ids, std::vector<int64_t>(100000, 0));
  EXPECT_EQ(d->sample(3).input_ids, std::vector<int64_t>{9});
  EXPECT_EQ(d->sample(4).input_ids, std::vector<int64_t>(5, 0));
  EXPECT_EQ(d->pointer(3), (3 + 2 + 100000) * 4);
  // The hole takes (almost) no disk space.
  struct stat st {};
  ASSERT_EQ(::stat((prefix + ".bin").c_str(), &st), 0);
  EXPECT_LT(static_cast<int64_t>(st.st_blocks) * 512, 100000 * 4);
}

TEST(IndexedWriter, RejectsEmptyAndOversizedSequences) {
  TempDir dir;
  IndexedDatasetWriter writer(dir.file("w"), TokenDType::kInt32);
  expect_throw_with<InvalidArgument>([&] { writer.add_sequence({}); }, {"at least one token"});
  for (int64_t bad : {int64_t{0}, int64_t{-3}, int64_t{1} << 31}) {
    expect_throw_with<InvalidArgument>([&] { writer.add_length_only(bad); },
                                       {std::to_string(bad), "[1, 2^31)"});
  }
  expect_throw_with<InvalidArgument>(
      [&] { IndexedDatasetWriter(dir.file("no/such/dir/x"), TokenDType::kInt32); },
      {"cannot create", "no/such/dir/x.bin"});
}

// ---------------------------------------------------------------------------------------------
// Byte-exact format

// uint16 tokens [[5, 6, 7], [8]] in one document, written out literally.
const unsigned char kLiteralIdx[] = {
    'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0,  // magic
    1,   0,   0,   0,   0,   0,   0,   0,     // version 1
    8,                                        // dtype code 8: uint16
    2,   0,   0,   0,   0,   0,   0,   0,     // 2 sequences
    2,   0,   0,   0,   0,   0,   0,   0,     // 2 document indices
    3,   0,   0,   0,   1,   0,   0,   0,     // lengths 3, 1
    0,   0,   0,   0,   0,   0,   0,   0,     // pointer 0
    6,   0,   0,   0,   0,   0,   0,   0,     // pointer 6 = 3 tokens x 2 bytes
    0,   0,   0,   0,   0,   0,   0,   0,     // document index 0
    2,   0,   0,   0,   0,   0,   0,   0,     // document index 2
};
const unsigned char kLiteralBin[] = {5, 0, 6, 0, 7, 0, 8, 0};

TEST(IndexedFormat, ReadsALiteralMegatronFile) {
  TempDir dir;
  const std::string prefix = dir.file("literal");
  write_bytes(prefix + ".idx", std::string(std::begin(kLiteralIdx), std::end(kLiteralIdx)));
  write_bytes(prefix + ".bin", std::string(std::begin(kLiteralBin), std::end(kLiteralBin)));
  const auto d = IndexedDataset::open(prefix);
  EXPECT_EQ(d->dtype(), TokenDType::kUint16);
  ASSERT_EQ(d->size(), 2);
  EXPECT_EQ(d->length(0), 3);
  EXPECT_EQ(d->length(1), 1);
  EXPECT_EQ(d->pointer(1), 6);
  EXPECT_EQ(d->sample(0).input_ids, (std::vector<int64_t>{5, 6, 7}));
  EXPECT_EQ(d->sample(1).input_ids, std::vector<int64_t>{8});
  EXPECT_EQ(std::vector<int64_t>(d->document_indices().begin(), d->document_indices().end()),
            (std::vector<int64_t>{0, 2}));
}

TEST(IndexedFormat, WriterProducesTheLiteralBytes) {
  TempDir dir;
  const std::string prefix = dir.file("ours");
  IndexedDatasetWriter writer(prefix, TokenDType::kUint16);
  writer.add_sequence(std::vector<int64_t>{5, 6, 7});
  writer.add_sequence(std::vector<int64_t>{8});
  writer.end_document();
  writer.finish();
  EXPECT_EQ(without_seal(read_bytes(prefix + ".idx")),
            std::string(std::begin(kLiteralIdx), std::end(kLiteralIdx)));
  EXPECT_EQ(read_bytes(prefix + ".bin"),
            std::string(std::begin(kLiteralBin), std::end(kLiteralBin)));
}

class IndexedFormatByDtype : public ::testing::TestWithParam<TokenDType> {};

// A file built field by field as Megatron lays it out (header, int32 lengths, int64 running
// pointers, int64 document indices 0..n) reads back, and the writer produces exactly those bytes.
TEST_P(IndexedFormatByDtype, HandBuiltFileMatchesReaderAndWriter) {
  const TokenDType dtype = GetParam();
  const auto code = static_cast<uint8_t>(dtype);
  const int64_t item = token_size(dtype);
  const auto sequences = tokens_for(dtype);
  std::vector<int32_t> lengths;
  std::string bin;
  for (const auto& s : sequences) {
    lengths.push_back(static_cast<int32_t>(s.size()));
    for (int64_t t : s) {
      switch (dtype) {
        case TokenDType::kUint8:
          put(bin, static_cast<uint8_t>(t));
          break;
        case TokenDType::kInt8:
          put(bin, static_cast<int8_t>(t));
          break;
        case TokenDType::kInt16:
          put(bin, static_cast<int16_t>(t));
          break;
        case TokenDType::kUint16:
          put(bin, static_cast<uint16_t>(t));
          break;
        case TokenDType::kInt32:
          put(bin, static_cast<int32_t>(t));
          break;
        case TokenDType::kInt64:
          put(bin, t);
          break;
        case TokenDType::kFloat32:
          put(bin, static_cast<float>(t));
          break;
        case TokenDType::kFloat64:
          put(bin, static_cast<double>(t));
          break;
      }
    }
  }
  std::string idx("MMIDIDX\0\0", 9);
  put(idx, uint64_t{1});
  put(idx, code);
  put(idx, uint64_t{lengths.size()});
  put(idx, uint64_t{lengths.size() + 1});
  for (int32_t len : lengths) put(idx, len);
  int64_t pointer = 0;
  for (int32_t len : lengths) {
    put(idx, pointer);
    pointer += len * item;
  }
  for (int64_t doc = 0; doc <= static_cast<int64_t>(lengths.size()); ++doc) put(idx, doc);
  ASSERT_EQ(idx.size(), 34 + 12 * lengths.size() + 8 * (lengths.size() + 1));
  ASSERT_EQ(static_cast<int64_t>(bin.size()), pointer);
  // The test's own builder agrees with this layout.
  EXPECT_EQ(MegatronIndex::of(lengths, code, item).bytes(), idx);

  TempDir dir;
  const std::string hand = dir.file("hand");
  write_bytes(hand + ".idx", idx);
  write_bytes(hand + ".bin", bin);
  const auto d = IndexedDataset::open(hand);
  EXPECT_EQ(d->dtype(), dtype);
  ASSERT_EQ(d->size(), static_cast<int64_t>(sequences.size()));
  for (size_t i = 0; i < sequences.size(); ++i) {
    EXPECT_EQ(d->sample(static_cast<int64_t>(i)).input_ids, sequences[i]) << "sequence " << i;
  }

  const std::string ours = dataset_of(dir, dtype, sequences);
  EXPECT_EQ(without_seal(read_bytes(ours + ".idx")), idx);
  EXPECT_EQ(read_bytes(ours + ".bin"), bin);
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, IndexedFormatByDtype, ::testing::ValuesIn(kAllDtypes),
                         [](const ::testing::TestParamInfo<TokenDType>& info) {
                           return token_dtype_name(info.param);
                         });

TEST(IndexedFormat, MultimodalIndexWithModeBytesIsAccepted) {
  TempDir dir;
  const std::string prefix = dir.file("mm");
  MegatronIndex idx = MegatronIndex::of({2, 3, 1}, 4, 4);
  idx.document_indices = {0, 2, 3};
  idx.modes = {0, 1, 0};  // text, image, text
  write_bytes(prefix + ".idx", idx.bytes());
  std::string bin;
  for (int32_t t : {1, 2, 3, 4, 5, 6}) put(bin, t);
  write_bytes(prefix + ".bin", bin);
  const auto d = IndexedDataset::open(prefix);
  ASSERT_EQ(d->size(), 3);
  EXPECT_EQ(std::vector<int32_t>(d->lengths().begin(), d->lengths().end()),
            (std::vector<int32_t>{2, 3, 1}));
  EXPECT_EQ(d->sample(1).input_ids, (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(d->sample(2).input_ids, std::vector<int64_t>{6});
  EXPECT_EQ(std::vector<int64_t>(d->document_indices().begin(), d->document_indices().end()),
            (std::vector<int64_t>{0, 2, 3}));
}

// ---------------------------------------------------------------------------------------------
// Blends (Megatron's build_blending_indices)

// A dataset of `size` samples whose sample i has length base + i and tokens {base + i}.
class CountingDataset final : public Dataset {
 public:
  CountingDataset(int64_t size, int64_t base) : size_(size), base_(base) {}
  int64_t size() const override { return size_; }
  int64_t length(int64_t index) const override {
    if (index < 0 || index >= size_) throw InvalidArgument("index out of range");
    return base_ + index;
  }
  Sample sample(int64_t index) const override {
    Sample s;
    s.id = index;
    s.input_ids.assign(static_cast<size_t>(length(index)), base_ + index);
    return s;
  }
  std::string describe() const override { return "counting " + std::to_string(base_); }

 private:
  int64_t size_;
  int64_t base_;
};

// Megatron-LM's build_blending_indices (megatron/core/datasets/helpers.cpp), written out again:
// weights normalised in Python (w / sum(weights)); for every sample the dataset with the largest
// weight * max(i, 1) - taken gets it, ties to the lowest index.
std::vector<std::pair<int, int64_t>> megatron_blending(std::vector<double> weights, int64_t size) {
  double sum = 0;
  for (double w : weights) sum += w;
  for (double& w : weights) w = w / sum;
  std::vector<int64_t> taken(weights.size(), 0);
  std::vector<std::pair<int, int64_t>> out;
  for (int64_t i = 0; i < size; ++i) {
    const double x = std::max(static_cast<double>(i), 1.0);
    int best = 0;
    for (int d = 1; d < static_cast<int>(weights.size()); ++d) {
      if (weights[d] * x - static_cast<double>(taken[d]) >
          weights[best] * x - static_cast<double>(taken[best])) {
        best = d;
      }
    }
    out.emplace_back(best, taken[static_cast<size_t>(best)]++);
  }
  return out;
}

std::vector<std::shared_ptr<const Dataset>> counting_datasets(const std::vector<int64_t>& sizes) {
  std::vector<std::shared_ptr<const Dataset>> out;
  for (size_t d = 0; d < sizes.size(); ++d) {
    out.push_back(std::make_shared<CountingDataset>(sizes[d], 1000 * static_cast<int64_t>(d + 1)));
  }
  return out;
}

TEST(BlendedDataset, FollowsMegatronsBlendingIndices) {
  const std::vector<std::vector<double>> weight_sets = {
      {1, 1},          {0.3, 0.7},      {0.5, 0.25, 0.25}, {1, 2, 3, 4}, {0.1, 0.9},
      {0.7, 0.2, 0.1}, {1e-3, 1, 1e-3}, {5, 5, 5, 5, 5},   {0.33, 0.67}, {0.2, 0.2, 0.2, 0.4}};
  const int64_t size = 997;
  for (const auto& weights : weight_sets) {
    const std::vector<int64_t> sizes(weights.size(), 10000);  // no wrap-around here
    const BlendedDataset blend(counting_datasets(sizes), weights, size);
    const auto expected = megatron_blending(weights, size);
    ASSERT_EQ(blend.size(), size);
    std::vector<int64_t> counts(weights.size(), 0);
    for (int64_t i = 0; i < size; ++i) {
      ASSERT_EQ(blend.source(i), expected[static_cast<size_t>(i)])
          << "sample " << i << " of the blend with " << ::testing::PrintToString(weights);
      ++counts[static_cast<size_t>(expected[static_cast<size_t>(i)].first)];
    }
    // The blend follows the weights within one sample of each dataset's share.
    double total = 0;
    for (double w : weights) total += w;
    for (size_t d = 0; d < weights.size(); ++d) {
      EXPECT_NEAR(static_cast<double>(counts[d]), weights[d] / total * size, 1.0 + 1e-9)
          << ::testing::PrintToString(weights) << " dataset " << d;
    }
  }
}

TEST(BlendedDataset, FirstSamplesAndTiesGoToTheLowestIndex) {
  // Equal weights: samples 0 and 1 both see x = 1, errors (0.5, 0.5) then (-0.5, 0.5).
  const BlendedDataset blend(counting_datasets({5, 5}), {1, 1}, 6);
  const std::vector<std::pair<int, int64_t>> expected = {{0, 0}, {1, 0}, {0, 1},
                                                         {1, 1}, {0, 2}, {1, 2}};
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(blend.source(i), expected[static_cast<size_t>(i)]);
  // 0.3 / 0.7: x = max(i, 1) makes samples 0 and 1 both go to the heavier dataset.
  const BlendedDataset skewed(counting_datasets({5, 5}), {0.3, 0.7}, 4);
  EXPECT_EQ(skewed.source(0), (std::pair<int, int64_t>{1, 0}));
  EXPECT_EQ(skewed.source(1), (std::pair<int, int64_t>{0, 0}));
  EXPECT_EQ(skewed.source(2), (std::pair<int, int64_t>{1, 1}));
  EXPECT_EQ(skewed.source(3), (std::pair<int, int64_t>{1, 2}));
}

TEST(BlendedDataset, WeightsAreNormalised) {
  const BlendedDataset a(counting_datasets({100, 100, 100}), {2, 6, 2}, 300);
  const BlendedDataset b(counting_datasets({100, 100, 100}), {0.2, 0.6, 0.2}, 300);
  for (int64_t i = 0; i < 300; ++i) ASSERT_EQ(a.source(i), b.source(i)) << "sample " << i;
  EXPECT_NE(a.describe().find("0.6 x counting 2000"), std::string::npos) << a.describe();
  EXPECT_NE(a.describe().find("blend of 3 datasets (300 samples)"), std::string::npos);
}

TEST(BlendedDataset, WrapsAroundSmallDatasetsAndRenumbersSamples) {
  // Dataset 0 has 2 samples, dataset 1 has 3; a blend of 20 takes each in order, wrapping.
  const BlendedDataset blend(counting_datasets({2, 3}), {1, 1}, 20);
  const auto expected = megatron_blending({1, 1}, 20);
  const int64_t sizes[] = {2, 3};
  for (int64_t i = 0; i < 20; ++i) {
    const auto [d, taken] = expected[static_cast<size_t>(i)];
    const int64_t local = taken % sizes[d];
    ASSERT_EQ(blend.source(i), (std::pair<int, int64_t>{d, local})) << "sample " << i;
    const int64_t base = 1000 * (d + 1);
    EXPECT_EQ(blend.length(i), base + local);
    const Sample s = blend.sample(i);
    EXPECT_EQ(s.id, i);  // the blend's numbering
    EXPECT_EQ(s.input_ids, std::vector<int64_t>(static_cast<size_t>(base + local), base + local));
  }
  EXPECT_EQ(blend.source(19).first, 1);
  expect_throw_with<InvalidArgument>([&] { blend.source(20); }, {"blend sample 20", "[0, 20)"});
  expect_throw_with<InvalidArgument>([&] { blend.length(-1); }, {"blend sample -1"});
}

TEST(BlendedDataset, RejectsBadWeightsSizesAndEmptyDatasets) {
  const auto two = counting_datasets({3, 3});
  expect_throw_with<InvalidArgument>([&] { BlendedDataset(two, {1.0}, 4); }, {"one weight per"});
  expect_throw_with<InvalidArgument>([&] { BlendedDataset({}, {}, 4); }, {"at least one dataset"});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (double bad : {0.0, -1.0, nan, inf}) {
    expect_throw_with<InvalidArgument>(
        [&] {
          BlendedDataset(two, {1.0, bad}, 4);
        },
        {"blend weight 1", "finite and > 0"});
  }
  expect_throw_with<InvalidArgument>(
      [&] {
        BlendedDataset(two, {1e308, 1e308}, 4);
      },
      {"weights add up"});
  expect_throw_with<InvalidArgument>([&] { BlendedDataset(two, {1, 1}, 0); }, {"size >= 1"});
  expect_throw_with<InvalidArgument>(
      [&] {
        BlendedDataset(counting_datasets({3, 0}), {1, 1}, 4);
      },
      {"blend dataset 1", "counting 2000", "empty"});
}

// ---------------------------------------------------------------------------------------------
// Data paths

TEST(OpenIndexedDatasets, OnePrefixOpensTheDataset) {
  TempDir dir;
  const std::string prefix = dataset_of(dir, TokenDType::kInt32, {{1, 2}, {3}});
  const auto d = open_indexed_datasets("  " + prefix + " ");
  ASSERT_NE(dynamic_cast<const IndexedDataset*>(d.get()), nullptr);
  EXPECT_EQ(d->size(), 2);
  EXPECT_EQ(d->sample(0).input_ids, (std::vector<int64_t>{1, 2}));
}

TEST(OpenIndexedDatasets, WeightPrefixPairsMakeABlend) {
  TempDir dir;
  const std::string a = dataset_of(dir, TokenDType::kInt32, {{1}, {2, 2}, {3, 3, 3}});
  const std::string b = dataset_of(dir, TokenDType::kUint16, {{7, 7, 7, 7}, {8}});
  const auto d = open_indexed_datasets("0.25 " + a + "\t0.75  " + b);
  const auto* blend = dynamic_cast<const BlendedDataset*>(d.get());
  ASSERT_NE(blend, nullptr);
  EXPECT_EQ(d->size(), 5);  // default: the sum of the sizes
  const auto expected = megatron_blending({0.25, 0.75}, 5);
  const int64_t sizes[] = {3, 2};
  for (int64_t i = 0; i < 5; ++i) {
    const auto [ds, taken] = expected[static_cast<size_t>(i)];
    ASSERT_EQ(blend->source(i), (std::pair<int, int64_t>{ds, taken % sizes[ds]}));
  }
  EXPECT_EQ(d->sample(0).input_ids, (std::vector<int64_t>{7, 7, 7, 7}));  // b's sample 0
  EXPECT_EQ(open_indexed_datasets("1 " + a + " 1 " + b, 40)->size(), 40);
  // Scientific notation and integer weights are weights too.
  EXPECT_EQ(open_indexed_datasets("2.5e-1 " + a + " 3 " + b)->size(), 5);
}

TEST(OpenIndexedDatasets, RejectsMalformedDataPaths) {
  TempDir dir;
  const std::string a = dataset_of(dir, TokenDType::kInt32, {{1}, {2}});
  expect_throw_with<InvalidArgument>([] { open_indexed_datasets("   "); }, {"empty data path"});
  expect_throw_with<InvalidArgument>([&] { open_indexed_datasets("0.5 " + a + " 0.5"); },
                                     {"weight-prefix pairs"});
  expect_throw_with<InvalidArgument>([&] { open_indexed_datasets("heavy " + a + " 1 " + a); },
                                     {"'heavy' is not a weight"});
  expect_throw_with<InvalidArgument>([&] { open_indexed_datasets("0.5x " + a + " 1 " + a); },
                                     {"'0.5x' is not a weight"});
  expect_throw_with<InvalidArgument>([&] { open_indexed_datasets("1e999 " + a + " 1 " + a); },
                                     {"'1e999' is not a weight"});
  for (const char* bad : {"0", "-1", "inf", "nan"}) {
    expect_throw_with<InvalidArgument>(
        [&] { open_indexed_datasets(std::string(bad) + " " + a + " 1 " + a); },
        {std::string("weight '") + bad + "' must be finite and > 0"});
  }
  expect_throw_with<InvalidArgument>([&] { open_indexed_datasets("1 " + a + " 1 " + a + "x"); },
                                     {"cannot open", a + "x.idx"});
}

}  // namespace
}  // namespace thdpack
