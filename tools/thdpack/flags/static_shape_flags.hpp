#pragma once
// The static-shape flags (CUDA graphs) that `run` and `pack` share: tail alignment of every pack's
// rows, where the tail goes, and a fixed number of cu_seqlens entries.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "thdpack/core/errors.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack::cli {

struct StaticShapeFlags {
  std::string tail_align = "none";
  int64_t tail_multiple = 0;
  std::string tail_policy = "append_dummy_seq";
  int64_t fixed_cu_seqlens_entries = 0;

  /// --tail-align, --tail-multiple, --tail-policy, --fixed-cu-seqlens-entries.
  void add_to(CLI::App& command);

  /// Sets the four static-shape fields of PackOptions or PipelineOptions. Throws InvalidArgument
  /// for an unknown alignment or policy, or --tail-multiple without --tail-align multiple.
  template <class Options>
  void apply_to(Options& options) const {
    options.tail_align = parse_tail_align(tail_align);
    if (tail_multiple > 0 && options.tail_align != TailAlign::kMultiple) {
      fail("--tail-multiple ", tail_multiple, " needs --tail-align multiple");
    }
    options.tail_multiple = tail_multiple;
    options.tail_policy = parse_tail_policy(tail_policy);
    options.fixed_cu_seqlens_entries = fixed_cu_seqlens_entries;
  }
};

}  // namespace thdpack::cli
