#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Samples and datasets (SPEC §2): the vocabulary every domain shares. The sources themselves (mock
// distributions, lengths files, JSONL, Megatron indexed datasets, pack files) live in
// thdpack/data/.
//
// Every dataset answers length(i) without materialising tokens, so planning a workload costs
// nothing more than reading lengths.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace thdpack {

/// One pre-tokenized training sample.
///
/// Label conventions (see docs/cu_seqlens.md):
/// - `loss_mask` (optional, same length as input_ids): loss_mask[j] != 0 means token j is a
///   prediction target (e.g. a response token). Position j of the pack predicts token j+1, so its
///   loss weight is loss_mask[j+1].
/// - `labels` (optional, same length): aligned with input_ids as in Hugging Face datasets:
///   labels[j] is input_ids[j] or the ignore id (-100); position j's label is labels[j+1].
///   With `labels_shifted` the labels are already shifted (labels[j] is position j's target, as
///   Megatron's SFT datasets store them) and are used as they are.
struct Sample {
  int64_t id = 0;
  std::vector<int64_t> input_ids;
  std::vector<float> loss_mask;
  std::vector<int64_t> labels;
  bool labels_shifted = false;
};

/// A finite, random-access collection of samples.
class Dataset {
 public:
  virtual ~Dataset() = default;
  /// Number of samples.
  virtual int64_t size() const = 0;
  /// Real length (tokens) of sample `index` in [0, size()); always >= 1.
  virtual int64_t length(int64_t index) const = 0;
  /// The sample itself; its id equals `index`.
  virtual Sample sample(int64_t index) const = 0;
  /// The samples `indices` (each in [0, size()), any order, repeats allowed), in the order given.
  /// A source that reads its files in blocks (Parquet row groups) reads each block these need at
  /// most once; this default asks sample() for each.
  virtual std::vector<Sample> samples(std::span<const int64_t> indices) const {
    std::vector<Sample> out;
    out.reserve(indices.size());
    for (const int64_t i : indices) out.push_back(sample(i));
    return out;
  }
  /// One line for logs: kind, source and size.
  virtual std::string describe() const = 0;
  /// Where sample `index` is in its files, for messages about it ("data.jsonl:284",
  /// "corpus.idx sequence 17"); empty for a source with no files.
  virtual std::string locate(int64_t /*index*/) const { return {}; }
};

}  // namespace thdpack
