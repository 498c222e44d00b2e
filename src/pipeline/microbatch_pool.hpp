#pragma once
// Micro-batch storage kept from step to step. A step's micro-batches are tens of megabytes of
// fresh memory; glibc hands large freed blocks back to the kernel, and the next step then pays a
// zeroed page per 4 KiB on first touch, which, with each step released before the next, is most
// of a step's C++ work. The pool takes a step's micro-batches back when the last reference to
// them goes (a StepResult, a Python view) and hands their arrays, capacity kept, to the next step.

#include <memory>
#include <mutex>
#include <vector>

#include "thdpack/packing/packed_batch.hpp"

namespace thdpack::detail {

class MicrobatchPool : public std::enable_shared_from_this<MicrobatchPool> {
 public:
  /// An empty micro-batch whose arrays have the capacity of a released one, or a new one.
  PackedBatch take();

  /// An empty vector for a step's micro-batches that gives them back to this pool (if it still
  /// exists) when its last owner releases it. Thread-safe: owners may release on any thread.
  std::shared_ptr<std::vector<PackedBatch>> new_step();

 private:
  void give_back(std::vector<PackedBatch>& batches);

  std::mutex mutex_;
  std::vector<PackedBatch> free_;  ///< at most two released steps' micro-batches
};

}  // namespace thdpack::detail
