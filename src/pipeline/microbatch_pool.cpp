#include "pipeline/microbatch_pool.hpp"

#include <algorithm>
#include <utility>

namespace thdpack::detail {
namespace {

// `to` takes `from`'s array, emptied, its capacity kept.
template <typename T>
void reuse(std::vector<T>& to, std::vector<T>& from) {
  to = std::move(from);
  to.clear();
}

}  // namespace

PackedBatch MicrobatchPool::take() {
  PackedBatch m;
  const std::lock_guard<std::mutex> lock(mutex_);
  if (free_.empty()) return m;
  PackedBatch& old = free_.back();
  reuse(m.tokens, old.tokens);
  reuse(m.labels, old.labels);
  reuse(m.loss_mask, old.loss_mask);
  reuse(m.position_ids, old.position_ids);
  reuse(m.padding_mask, old.padding_mask);
  reuse(m.cu_seqlens, old.cu_seqlens);
  reuse(m.cu_seqlens_padded, old.cu_seqlens_padded);
  reuse(m.sample_ids, old.sample_ids);
  free_.pop_back();
  return m;
}

std::shared_ptr<std::vector<PackedBatch>> MicrobatchPool::new_step() {
  return {new std::vector<PackedBatch>(),
          [pool = weak_from_this()](std::vector<PackedBatch>* step) {
            if (const auto p = pool.lock()) p->give_back(*step);
            delete step;
          }};
}

void MicrobatchPool::give_back(std::vector<PackedBatch>& batches) {
  const std::lock_guard<std::mutex> lock(mutex_);
  // Two steps' worth: the step being built and the one a prefetching loader holds. Stacked last
  // first, so that take() hands the next step's k-th micro-batch this step's k-th arrays: steps
  // alike have micro-batches alike in size, and an array smaller than its new rows would be
  // allocated again.
  const size_t keep = 2 * batches.size();
  const size_t kept = std::min(batches.size(), keep > free_.size() ? keep - free_.size() : 0);
  for (size_t k = kept; k-- > 0;) free_.push_back(std::move(batches[k]));
}

}  // namespace thdpack::detail
