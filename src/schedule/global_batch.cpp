#include "thdpack/schedule/global_batch.hpp"
#include "thdpack/core/oversize_fix.hpp"

#include <string>

#include "thdpack/core/errors.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack {

std::vector<int64_t> global_batch_indices(int64_t step, int64_t global_batch,
                                          int64_t dataset_size) {
  if (step < 0 || global_batch < 1 || dataset_size < 1) {
    throw InvalidArgument("global batch indices need step >= 0, batch >= 1, dataset size >= 1");
  }
  check(global_batch <= dataset_size, "global batch of ", global_batch,
        " samples is larger than the dataset (", dataset_size, " samples)");
  std::vector<int64_t> indices(static_cast<size_t>(global_batch));
  // The product of two residues may not fit in int64 (datasets over 3e9 samples); 128 bits do.
  __extension__ using Int128 = __int128;
  const auto start = static_cast<int64_t>(Int128{step % dataset_size} *
                                          (global_batch % dataset_size) % dataset_size);
  for (int64_t j = 0; j < global_batch; ++j) {
    indices[static_cast<size_t>(j)] = (start + j) % dataset_size;
  }
  return indices;
}

std::string sample_order_name(SampleOrder order) {
  return order == SampleOrder::kMegatron ? "megatron" : "contiguous";
}

SampleOrder parse_sample_order(const std::string& name) {
  if (name == "contiguous") return SampleOrder::kContiguous;
  if (name == "megatron") return SampleOrder::kMegatron;
  fail("sample order must be 'contiguous' or 'megatron', got '", name, "'");
}

std::vector<int64_t> rank_major_indices(std::vector<int64_t> indices, int dp, SampleOrder order) {
  const auto count = static_cast<int64_t>(indices.size());
  check(dp >= 1 && count % dp == 0, "global batch (", count,
        " samples) must be a multiple of dp=", dp);
  if (order == SampleOrder::kContiguous || dp == 1) return indices;
  std::vector<int64_t> out;
  out.reserve(indices.size());
  for (int r = 0; r < dp; ++r) {
    for (int64_t j = r; j < count; j += dp) out.push_back(indices[static_cast<size_t>(j)]);
  }
  return out;
}

int64_t length_within_capacity(int64_t id, int64_t length, int64_t divisor, int64_t capacity,
                               OversizePolicy policy, const std::string& capacity_name) {
  if (round_up(length, divisor) <= capacity) return length;
  if (policy == OversizePolicy::kError) {
    fail("sequence ", id, " has ", length, " tokens but ", capacity_name, " is ", capacity, "; ",
         kOversizeFix);
  }
  return capacity / divisor * divisor;
}

GlobalBatch make_global_batch(const Dataset& dataset, int64_t step, const GlobalBatchOptions& o) {
  check(o.dp >= 1 && o.global_batch >= 1 && o.global_batch % o.dp == 0, "global batch (",
        o.global_batch, " samples) must be a positive multiple of dp=", o.dp);
  check(o.divisor >= 1 && o.capacity >= o.divisor, "capacity ", o.capacity,
        " must be at least the padding divisor ", o.divisor);
  GlobalBatch b;
  b.ids =
      rank_major_indices(global_batch_indices(step, o.global_batch, dataset.size()), o.dp, o.order);
  b.samples_per_rank.assign(static_cast<size_t>(o.dp), o.global_batch / o.dp);
  b.real_lengths.reserve(b.ids.size());
  b.padded_lengths.reserve(b.ids.size());
  for (int64_t id : b.ids) {
    const int64_t length = dataset.length(id);
    int64_t real = 0;
    try {
      real = length_within_capacity(id, length, o.divisor, o.capacity, o.oversize);
    } catch (const InvalidArgument& e) {
      const std::string where = dataset.locate(id);  // the file and line, where there is one
      if (where.empty()) throw;
      fail(where, ": ", e.what());
    }
    if (real != length) ++b.truncated;
    b.real_lengths.push_back(real);
    b.padded_lengths.push_back(round_up(real, o.divisor));
  }
  return b;
}

}  // namespace thdpack
