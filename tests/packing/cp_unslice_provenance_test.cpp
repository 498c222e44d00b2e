// cp_unslice refuses slices of different packs even where their metadata is equal (same lengths,
// same sample ids): what each slice was cut from travels with it as a digest of the whole pack.

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "expect_throw.hpp"
#include "thdpack/core/dataset.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/packing/cp_partition.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack {
namespace {

// A pack of samples with the given lengths and ids 0..n-1, tokens drawn from `rng`.
PackedBatch random_pack(std::mt19937_64& rng, const std::vector<int64_t>& lengths, int64_t divisor) {
  std::vector<Sample> samples(lengths.size());
  for (size_t i = 0; i < lengths.size(); ++i) {
    samples[i].id = static_cast<int64_t>(i);
    for (int64_t j = 0; j < lengths[i]; ++j) {
      samples[i].input_ids.push_back(static_cast<int64_t>(rng() % 1000));
    }
  }
  std::vector<SampleView> views;
  for (const Sample& s : samples) views.push_back(view_of(s));
  PackOptions o;
  o.divisor = divisor;
  return pack_samples(views, o);
}

TEST(CpUnsliceProvenance, SlicesOfTwoPacksWithEqualMetadataAreRefused) {
  std::mt19937_64 rng(11);
  int refused = 0;
  for (int seed = 0; seed < 200; ++seed) {
    const int cp = 2 << (rng() % 3);
    std::vector<int64_t> lengths(1 + rng() % 6);
    for (auto& l : lengths) l = 1 + static_cast<int64_t>(rng() % 40);
    const PackedBatch a = random_pack(rng, lengths, 2 * cp);
    const PackedBatch b = random_pack(rng, lengths, 2 * cp);
    std::vector<PackedBatch> slices;
    for (int r = 0; r < cp; ++r) slices.push_back(cp_slice(a.view(), cp, r));
    std::vector<PackedBatchView> views;
    for (const auto& s : slices) views.push_back(s.view());
    EXPECT_EQ(cp_unslice(views).tokens, a.tokens);
    if (a.tokens == b.tokens) continue;
    const int other = static_cast<int>(rng() % static_cast<uint64_t>(cp));
    const PackedBatch foreign = cp_slice(b.view(), cp, other);
    views[static_cast<size_t>(other)] = foreign.view();
    const int first_different = other == 0 ? 1 : other;
    test_util::expect_throw_with<InvalidArgument>(
        [&] { cp_unslice(views); },
        "slice " + std::to_string(first_different) + " was cut from a different pack");
    ++refused;
  }
  EXPECT_GT(refused, 150);
}

TEST(CpUnsliceProvenance, SlicesWithoutADigestAreCheckedByMetadataOnly) {
  std::mt19937_64 rng(12);
  const PackedBatch a = random_pack(rng, {6, 2}, 4);
  PackedBatch s0 = cp_slice(a.view(), 2, 0), s1 = cp_slice(a.view(), 2, 1);
  s1.source_digest = 0;  // e.g. a slice built by the pipeline at the source of its samples
  const std::vector<PackedBatchView> views = {s0.view(), s1.view()};
  EXPECT_EQ(cp_unslice(views).tokens, a.tokens);
}

}  // namespace
}  // namespace thdpack
