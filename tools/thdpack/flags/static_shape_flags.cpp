#include "flags/static_shape_flags.hpp"

#include "flags/flag_values.hpp"

namespace thdpack::cli {

void StaticShapeFlags::add_to(CLI::App& cmd) {
  cmd.add_option("--tail-align", tail_align,
                 "static shapes (CUDA graphs): none, multiple (rows of every pack rounded up to "
                 "--tail-multiple) or capacity (every pack M x cp rows)")
      ->check(non_empty())
      ->capture_default_str();
  cmd.add_option("--tail-multiple", tail_multiple,
                 "N for --tail-align multiple (a multiple of the padding divisor)")
      ->check(non_negative_integer());
  cmd.add_option("--tail-policy", tail_policy,
                 "where tail rows go: append_dummy_seq (an all-padding sequence of real length "
                 "0) or extend_last (the last padded boundary moves)")
      ->check(non_empty())
      ->capture_default_str();
  cmd.add_option("--fixed-cu-seqlens-entries", fixed_cu_seqlens_entries,
                 "if > 0, every cu_seqlens array has exactly this many entries (last repeated)")
      ->check(non_negative_integer());
}

}  // namespace thdpack::cli
