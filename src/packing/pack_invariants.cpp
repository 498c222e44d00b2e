#include <algorithm>

#include "thdpack/core/errors.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack {
namespace {

template <class... Parts>
[[noreturn]] void broken(const Parts&... what) {
  fail<InternalError>("pack invariant broken: ", what...);
}

}  // namespace

void check_pack_invariants(const PackedBatchView& p, const PackOptions& o) {
  const auto rows = p.tokens.size();
  if (p.labels.size() != rows || p.loss_mask.size() != rows || p.position_ids.size() != rows ||
      p.padding_mask.size() != rows) {
    broken("per-row fields have different lengths");
  }
  if (p.cp_size != 1) broken("check_pack_invariants needs a whole pack (cp_size 1)");
  // Malformed cu arrays are a broken invariant here, not bad user input.
  const ThdLayout layout = [&] {
    try {
      return p.layout();
    } catch (const InvalidArgument& e) {
      broken(e.what());
    }
  }();
  if (layout.total_rows() != static_cast<int64_t>(rows)) {
    broken("cu_seqlens_padded ends at ", layout.total_rows(), " but the pack has ", rows, " rows");
  }
  if (o.capacity > 0 && o.tail_align == TailAlign::kNone &&
      static_cast<int64_t>(rows) > o.capacity && p.sample_ids.size() > 1) {
    broken("pack of ", rows, " rows exceeds capacity ", o.capacity);
  }
  int64_t max_padded = 0;
  for (int64_t i = 0; i < layout.num_sequences(); ++i) {
    const int64_t real = layout.real_length(i);
    const int64_t padded = layout.padded_length(i);
    const int64_t at = layout.padded_offset(i);
    if (padded % o.divisor != 0) {
      broken("sequence ", i, " padded length ", padded, " is not a multiple of ", o.divisor);
    }
    max_padded = std::max(max_padded, padded);
    for (int64_t j = 0; j < padded; ++j) {
      const auto r = static_cast<size_t>(at + j);
      const bool is_pad = j >= real;
      if (p.padding_mask[r] != (is_pad ? 1 : 0))
        broken("sequence ", i, ": padding_mask wrong at row ", r);
      if (!is_pad && p.position_ids[r] != j) {
        broken("sequence ", i, ": position id ", p.position_ids[r], " at row ", r, ", expected ",
               j);
      }
      if (is_pad) {
        const int64_t want_pos = o.pad_positions == PadPositions::kContinue ? j : 0;
        if (p.tokens[r] != o.pad_id || p.labels[r] != o.ignore_id || p.loss_mask[r] != 0.0f ||
            p.position_ids[r] != want_pos) {
          broken("sequence ", i, ": padding row ", r,
                 " must hold pad id, ignore label, zero loss mask and its position");
        }
      }
    }
  }
  if (p.max_seqlen != max_padded) {
    broken("max_seqlen ", p.max_seqlen, " but the largest padded length is ", max_padded);
  }
}

}  // namespace thdpack
