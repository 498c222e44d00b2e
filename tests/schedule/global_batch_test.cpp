// Global batch composition (include/thdpack/schedule/global_batch.hpp; SPEC §3 padding, §10
// oversize).

#include "thdpack/schedule/global_batch.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "expect_throw.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/data/workloads.hpp"

namespace thdpack {
namespace {

using test_util::expect_throw_with;

// A dataset with the given lengths (tokens are not needed here).
class LengthsDataset final : public Dataset {
 public:
  explicit LengthsDataset(std::vector<int64_t> lengths) : lengths_(std::move(lengths)) {}
  int64_t size() const override { return static_cast<int64_t>(lengths_.size()); }
  int64_t length(int64_t index) const override { return lengths_.at(static_cast<size_t>(index)); }
  Sample sample(int64_t index) const override {
    Sample s;
    s.id = index;
    s.input_ids.assign(static_cast<size_t>(length(index)), 7);
    return s;
  }
  std::string describe() const override { return "lengths"; }

 private:
  std::vector<int64_t> lengths_;
};

GlobalBatchOptions options(int64_t batch, int dp, int64_t divisor, int64_t capacity,
                           OversizePolicy oversize = OversizePolicy::kError) {
  GlobalBatchOptions o;
  o.global_batch = batch;
  o.dp = dp;
  o.divisor = divisor;
  o.capacity = capacity;
  o.oversize = oversize;
  return o;
}

std::vector<int64_t> reference_indices(int64_t step, int64_t batch, int64_t n) {
  std::vector<int64_t> out;
  for (int64_t j = 0; j < batch; ++j) out.push_back((step * batch + j) % n);
  return out;
}

// ---------------------------------------------------------------------------------------------
// global_batch_indices

TEST(GlobalBatchIndices, ConsecutiveAndWrapping) {
  EXPECT_EQ(global_batch_indices(0, 4, 10), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(global_batch_indices(1, 4, 10), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(global_batch_indices(2, 4, 10), (std::vector<int64_t>{8, 9, 0, 1}));
  EXPECT_EQ(global_batch_indices(3, 4, 10), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(global_batch_indices(5, 4, 10), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(global_batch_indices(7, 10, 10), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(global_batch_indices(4, 1, 1), (std::vector<int64_t>{0}));
}

TEST(GlobalBatchIndices, MatchesReferenceForManyShapes) {
  for (int64_t n = 1; n <= 13; ++n) {
    for (int64_t b = 1; b <= n; ++b) {
      for (int64_t step = 0; step < 30; ++step) {
        ASSERT_EQ(global_batch_indices(step, b, n), reference_indices(step, b, n))
            << "step " << step << " batch " << b << " size " << n;
      }
    }
  }
}

TEST(GlobalBatchIndices, LargeStepsDoNotOverflow) {
  const int64_t step = 1'000'000'000'000;  // 10^12 steps
  const int64_t batch = 1024, n = 1'000'003;
  // (step·batch) mod n without overflow: 10^12 mod n, times 1024, mod n.
  const int64_t start = (step % n) * batch % n;
  const auto got = global_batch_indices(step, batch, n);
  ASSERT_EQ(got.size(), 1024u);
  for (int64_t j = 0; j < batch; ++j) EXPECT_EQ(got[static_cast<size_t>(j)], (start + j) % n);
}

TEST(GlobalBatchIndices, Errors) {
  expect_throw_with<InvalidArgument>([] { global_batch_indices(0, 11, 10); },
                                     {"11", "10", "larger than the dataset"});
  expect_throw_with<InvalidArgument>([] { global_batch_indices(-1, 2, 10); }, {"step"});
  expect_throw_with<InvalidArgument>([] { global_batch_indices(0, 0, 10); }, {"batch"});
  expect_throw_with<InvalidArgument>([] { global_batch_indices(0, 1, 0); }, {"dataset"});
}

// ---------------------------------------------------------------------------------------------
// make_global_batch

TEST(GlobalBatchMake, HandCheckedPaddingAndSplit) {
  const LengthsDataset d({5, 9, 12, 3, 8, 16, 1, 7});
  const GlobalBatch b0 = make_global_batch(d, 0, options(4, 2, 4, 16));
  EXPECT_EQ(b0.ids, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(b0.real_lengths, (std::vector<int64_t>{5, 9, 12, 3}));
  EXPECT_EQ(b0.padded_lengths, (std::vector<int64_t>{8, 12, 12, 4}));
  EXPECT_EQ(b0.samples_per_rank, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(b0.truncated, 0);

  const GlobalBatch b1 = make_global_batch(d, 1, options(4, 2, 4, 16));
  EXPECT_EQ(b1.ids, (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(b1.real_lengths, (std::vector<int64_t>{8, 16, 1, 7}));
  EXPECT_EQ(b1.padded_lengths, (std::vector<int64_t>{8, 16, 4, 8}));

  // Step 2 wraps around to the start.
  EXPECT_EQ(make_global_batch(d, 2, options(4, 2, 4, 16)).ids, b0.ids);
}

TEST(GlobalBatchMake, WrapsMidBatch) {
  const LengthsDataset d({1, 2, 3, 4, 5, 6});
  const GlobalBatch b = make_global_batch(d, 1, options(4, 2, 1, 100));
  EXPECT_EQ(b.ids, (std::vector<int64_t>{4, 5, 0, 1}));
  EXPECT_EQ(b.real_lengths, (std::vector<int64_t>{5, 6, 1, 2}));
  EXPECT_EQ(b.padded_lengths, b.real_lengths);  // divisor 1
}

TEST(GlobalBatchMake, DpRankMajorSplit) {
  // DP rank r holds positions [r·B/dp, (r+1)·B/dp) of the batch.
  std::vector<int64_t> lengths(48);
  std::iota(lengths.begin(), lengths.end(), 1);
  const LengthsDataset d(lengths);
  const GlobalBatch b = make_global_batch(d, 1, options(12, 3, 1, 1000));
  ASSERT_EQ(b.samples_per_rank, (std::vector<int64_t>{4, 4, 4}));
  ASSERT_EQ(b.ids.size(), 12u);
  for (int r = 0; r < 3; ++r) {
    for (int j = 0; j < 4; ++j) {
      const size_t pos = static_cast<size_t>(r * 4 + j);
      EXPECT_EQ(b.ids[pos], 12 + r * 4 + j) << "rank " << r << " local " << j;
      EXPECT_EQ(b.real_lengths[pos], lengths[static_cast<size_t>(b.ids[pos])]);
    }
  }
}

TEST(GlobalBatchMake, PaddedLengthsAreRealRoundedUpOnAMockDataset) {
  MockConfig c = workload("longtail-32k").dataset;
  c.size = 5000;
  const auto d = make_mock_dataset(c);
  for (int64_t divisor : {1, 2, 4, 8, 16, 24}) {
    const int64_t capacity = 32768 / divisor * divisor + divisor * 4;
    for (int64_t step : {0, 3, 9}) {
      const GlobalBatch b = make_global_batch(*d, step, options(512, 8, divisor, capacity));
      ASSERT_EQ(b.ids, global_batch_indices(step, 512, 5000));
      ASSERT_EQ(b.real_lengths.size(), 512u);
      ASSERT_EQ(b.padded_lengths.size(), 512u);
      EXPECT_EQ(b.samples_per_rank, std::vector<int64_t>(8, 64));
      EXPECT_EQ(b.truncated, 0);
      for (size_t i = 0; i < b.ids.size(); ++i) {
        const int64_t real = d->length(b.ids[i]);
        ASSERT_EQ(b.real_lengths[i], real);
        const int64_t padded = b.padded_lengths[i];
        ASSERT_EQ(padded % divisor, 0) << "divisor " << divisor;
        ASSERT_GE(padded, real);
        ASSERT_LT(padded - real, divisor);
        ASSERT_LE(padded, capacity);
      }
    }
  }
}

TEST(GlobalBatchMake, BenchmarkWorkloadsFitWithoutTruncation) {
  for (const std::string& n : workload_names()) {
    const Workload w = workload(n);
    const int dp = w.reference_batches.front().first;
    const int64_t divisor = w.cp > 1 ? 2 * w.cp : 1;
    const auto d = make_mock_dataset(w.dataset);
    const GlobalBatch b = make_global_batch(
        *d, 0,
        options(default_global_batch(w, dp), dp, divisor, w.max_seqlen_per_dp_cp_rank * w.cp));
    EXPECT_EQ(static_cast<int64_t>(b.ids.size()), default_global_batch(w, dp)) << n;
    EXPECT_EQ(b.truncated, 0) << n;
  }
}

TEST(GlobalBatchMake, OversizeIsAnErrorNamingSampleAndFix) {
  const LengthsDataset d({4, 4, 4, 4, 4, 20, 4, 4});
  const std::string message = expect_throw_with<InvalidArgument>(
      [&] { make_global_batch(d, 1, options(4, 2, 4, 16)); },
      {"sequence 5", "20 tokens", "16", "max_seqlen_per_dp_cp_rank (-M)", "--oversize truncate"});
  EXPECT_NE(message.find("max_seqlen_per_dp_cp_rank x cp"), std::string::npos) << message;
  // Step 0 does not contain the long sample.
  EXPECT_NO_THROW(make_global_batch(d, 0, options(4, 2, 4, 16)));
}

TEST(GlobalBatchMake, OversizeAfterPaddingIsAnErrorToo) {
  // 13 tokens fit 14, but padded to the divisor 4 it needs 16.
  const LengthsDataset d({13, 2});
  expect_throw_with<InvalidArgument>([&] { make_global_batch(d, 0, options(2, 1, 4, 14)); },
                                     {"sequence 0", "13 tokens"});
  // Exactly at capacity is fine.
  const LengthsDataset exact({16, 2});
  const GlobalBatch b = make_global_batch(exact, 0, options(2, 1, 4, 16));
  EXPECT_EQ(b.padded_lengths, (std::vector<int64_t>{16, 4}));
}

TEST(GlobalBatchMake, TruncatePolicyCutsToCapacityRoundedDownToTheDivisor) {
  const LengthsDataset d({30, 5, 17, 18, 40, 16});
  // capacity 18, divisor 4: samples padded above 18 are cut to 16.
  const GlobalBatch b = make_global_batch(d, 0, options(6, 2, 4, 18, OversizePolicy::kTruncate));
  EXPECT_EQ(b.real_lengths, (std::vector<int64_t>{16, 5, 16, 16, 16, 16}));
  EXPECT_EQ(b.padded_lengths, (std::vector<int64_t>{16, 8, 16, 16, 16, 16}));
  EXPECT_EQ(b.truncated, 4);  // 30, 17 (pads to 20), 18 (pads to 20), 40; 16 fits as is
  EXPECT_EQ(b.ids, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));

  // Divisor 1: truncated to the capacity itself.
  const GlobalBatch c = make_global_batch(d, 0, options(6, 3, 1, 18, OversizePolicy::kTruncate));
  EXPECT_EQ(c.real_lengths, (std::vector<int64_t>{18, 5, 17, 18, 18, 16}));
  EXPECT_EQ(c.truncated, 2);
}

TEST(GlobalBatchMake, TruncateCountsOnlyThisBatch) {
  const LengthsDataset d({100, 1, 1, 1});
  const auto o = options(2, 1, 1, 10, OversizePolicy::kTruncate);
  EXPECT_EQ(make_global_batch(d, 0, o).truncated, 1);
  EXPECT_EQ(make_global_batch(d, 1, o).truncated, 0);
}

TEST(GlobalBatchMake, BatchMustBeAPositiveMultipleOfDp) {
  const LengthsDataset d(std::vector<int64_t>(64, 8));
  expect_throw_with<InvalidArgument>([&] { make_global_batch(d, 0, options(6, 4, 1, 16)); },
                                     {"6", "dp=4", "multiple"});
  expect_throw_with<InvalidArgument>([&] { make_global_batch(d, 0, options(0, 1, 1, 16)); }, {"0"});
  expect_throw_with<InvalidArgument>([&] { make_global_batch(d, 0, options(-4, 2, 1, 16)); },
                                     {"-4"});
  expect_throw_with<InvalidArgument>([&] { make_global_batch(d, 0, options(4, 0, 1, 16)); },
                                     {"dp=0"});
}

TEST(GlobalBatchMake, BatchLargerThanDatasetIsAnError) {
  const LengthsDataset d(std::vector<int64_t>(10, 8));
  expect_throw_with<InvalidArgument>([&] { make_global_batch(d, 0, options(12, 2, 1, 16)); },
                                     {"12", "10", "dataset"});
}

TEST(GlobalBatchMake, CapacityMustHoldTheDivisor) {
  const LengthsDataset d(std::vector<int64_t>(8, 2));
  expect_throw_with<InvalidArgument>([&] { make_global_batch(d, 0, options(4, 2, 8, 4)); },
                                     {"capacity", "divisor"});
  expect_throw_with<InvalidArgument>([&] { make_global_batch(d, 0, options(4, 2, 1, 0)); },
                                     {"capacity"});
  expect_throw_with<InvalidArgument>([&] { make_global_batch(d, 0, options(4, 2, 0, 16)); },
                                     {"divisor"});
}

TEST(GlobalBatchMake, DefaultOptionsAreError) {
  const GlobalBatchOptions o;
  EXPECT_EQ(o.oversize, OversizePolicy::kError);
  EXPECT_EQ(o.dp, 1);
  EXPECT_EQ(o.divisor, 1);
}

}  // namespace
}  // namespace thdpack
