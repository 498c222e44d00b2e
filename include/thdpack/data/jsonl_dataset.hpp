#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Pre-tokenized JSONL (SPEC §2): {"input_ids":[...]} with optional "loss_mask" or "labels".

#include <memory>
#include <string>

#include "thdpack/core/dataset.hpp"

namespace thdpack {

/// Options of the JSONL reader.
struct JsonlOptions {
  /// Keys other than input_ids, loss_mask, labels are an error unless this is set.
  bool ignore_unknown_keys = false;
  /// Treat "labels" as already shifted (position j's target) instead of aligned with input_ids.
  bool labels_shifted = false;
};

/// Loads a pre-tokenized JSONL file into memory: one JSON object per line with "input_ids" (list of
/// non-negative integers, at least one) and optionally "loss_mask" (0/1 list) or "labels" (list of
/// non-negative token ids or -100 for ignored positions), each exactly as long as input_ids (an
/// empty list is a mismatch too). Blank lines are skipped. Any other content
/// throws InvalidArgument naming the file, line and key.
std::unique_ptr<Dataset> load_jsonl_dataset(const std::string& path,
                                            const JsonlOptions& options = {});

}  // namespace thdpack
