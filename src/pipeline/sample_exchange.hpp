#pragma once
// Moving rows: the sample exchange over a DP group (step 3) and the TP broadcast (step 4).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "pipeline/microbatch_pool.hpp"
#include "pipeline/pack_segments.hpp"
#include "pipeline/segment_wire.hpp"
#include "thdpack/comm/communicator.hpp"

namespace thdpack::detail {

/// A byte buffer kept from step to step. Fresh memory costs the kernel a zeroed page per 4 KiB on
/// first touch, which for the tens of megabytes a step moves is a large share of its time; a kept
/// buffer is touched once. Its bytes are not initialised.
class ScratchBuffer {
 public:
  /// `bytes` bytes, valid until the next call (grows, never shrinks). A buffer that grows takes
  /// kHeadroom more than asked, so that steps a little larger than the largest so far (step sizes
  /// vary by a few percent) reuse it instead of faulting in a new one.
  std::span<std::byte> get(int64_t bytes);

  static constexpr double kHeadroom = 0.25;

 private:
  std::unique_ptr<std::byte[]> data_;
  int64_t size_ = 0;
};

/// A pipeline's memory kept from step to step (one step at a time).
struct ExchangeBuffers {
  ScratchBuffer send;
  ScratchBuffer recv;
  std::shared_ptr<MicrobatchPool> microbatches = std::make_shared<MicrobatchPool>();
};

/// Fills `microbatches` (this rank's K micro-batches from empty_microbatch) with the rows of the
/// stage's fields. Each segment of this rank's samples is written once, straight from `local` to
/// where it goes: the send buffer at its final offset (in `wire`'s format), or this rank's
/// micro-batch when it stays. One alltoallv over `dp_group`; received rows are read once into the
/// micro-batches.
void exchange_samples(Communicator& dp_group, const StepGeometry& geometry,
                      const LocalSamples& local, const SegmentWire& wire, ExchangeBuffers& buffers,
                      std::vector<PackedBatch>& microbatches);

/// Rank 0 of `tp_group` sends the rows of the stage's fields (`wire.fields()`) of all its
/// micro-batches to the others in one broadcast, in `wire`'s format (in the tokens format segment
/// by segment, `segments[k]` being micro-batch k's); the others' row arrays of those fields must
/// be empty (as empty_microbatch leaves them): the rows are appended.
void broadcast_rows(Communicator& tp_group, const SegmentWire& wire,
                    std::span<const std::span<const Segment>> segments, ScratchBuffer& buffer,
                    std::vector<PackedBatch>& microbatches);

}  // namespace thdpack::detail
