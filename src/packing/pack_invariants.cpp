#include <algorithm>
#include <string>

#include "thdpack/core/errors.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack {
namespace {

[[noreturn]] void broken(const std::string& what) {
  throw InternalError("pack invariant broken: " + what);
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
    broken("cu_seqlens_padded ends at " + std::to_string(layout.total_rows()) +
           " but the pack has " + std::to_string(rows) + " rows");
  }
  if (o.capacity > 0 && o.tail_align == TailAlign::kNone &&
      static_cast<int64_t>(rows) > o.capacity && p.sample_ids.size() > 1) {
    broken("pack of " + std::to_string(rows) + " rows exceeds capacity " +
           std::to_string(o.capacity));
  }
  int64_t max_padded = 0;
  for (int64_t i = 0; i < layout.num_sequences(); ++i) {
    const int64_t real = layout.real_length(i);
    const int64_t padded = layout.padded_length(i);
    const int64_t at = layout.padded_offset(i);
    const std::string who = "sequence " + std::to_string(i);
    if (padded % o.divisor != 0) {
      broken(who + " padded length " + std::to_string(padded) + " is not a multiple of " +
             std::to_string(o.divisor));
    }
    max_padded = std::max(max_padded, padded);
    for (int64_t j = 0; j < padded; ++j) {
      const auto r = static_cast<size_t>(at + j);
      const bool is_pad = j >= real;
      if (p.padding_mask[r] != (is_pad ? 1 : 0))
        broken(who + ": padding_mask wrong at row " + std::to_string(r));
      if (!is_pad && p.position_ids[r] != j) {
        broken(who + ": position id " + std::to_string(p.position_ids[r]) + " at row " +
               std::to_string(r) + ", expected " + std::to_string(j));
      }
      if (is_pad) {
        const int64_t want_pos = o.pad_positions == PadPositions::kContinue ? j : 0;
        if (p.tokens[r] != o.pad_id || p.labels[r] != o.ignore_id || p.loss_mask[r] != 0.0f ||
            p.position_ids[r] != want_pos) {
          broken(who + ": padding row " + std::to_string(r) +
                 " must hold pad id, ignore label, zero loss mask and its position");
        }
      }
    }
  }
  if (p.max_seqlen != max_padded) {
    broken("max_seqlen " + std::to_string(p.max_seqlen) + " but the largest padded length is " +
           std::to_string(max_padded));
  }
}

}  // namespace thdpack
