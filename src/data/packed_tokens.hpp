#pragma once
// The tokens and loss weights of every pack, back to back in pack order, as Megatron-Bridge's
// packed Parquet holds them (bridge_parquet.hpp): the source is read once, in index order, into a
// temporary file beside the output, and the rows are then cut out of it in any order.

#include <cstdint>
#include <string>
#include <vector>

#include "thdpack/core/dataset.hpp"
#include "thdpack/packing/bin_packing.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack::detail {

class PackedTokens {
 public:
  /// Reads the samples of `packs` from `dataset` (Dataset::samples, many at a time, in index
  /// order in a few consecutive parts read side by side, so a source that reads in blocks
  /// decodes each block about once; the error of the lowest sample index) into an unnamed
  /// temporary file in `folder` (5 bytes a token, space reserved up front, gone when this is),
  /// mapped. A sample's weights are its positions' loss weights as pack_samples makes them
  /// (position j's weight says whether token j+1 is trained; its last position 0). Throws
  /// InvalidArgument naming the sample for a token id past int32 or labels that train a position
  /// on something other than its next token (the format has no labels column), and naming the
  /// folder when the file cannot be made (no room on its file system, say).
  PackedTokens(const Dataset& dataset, const Bins& packs, const std::string& folder);

  /// The first token of pack p in [0, packs.count()]; pack p ends where pack p + 1 starts.
  int64_t pack_start(int64_t p) const { return pack_starts_[static_cast<size_t>(p)]; }
  const int32_t* tokens() const { return tokens_; }
  const int8_t* weights() const { return weights_; }

 private:
  void map(const std::string& folder, int64_t tokens);
  // Places the samples [first, last) of `dataset` that are in a pack (place_of[i] >= 0).
  void fill(const Dataset& dataset, const std::vector<int64_t>& place_of, int64_t first,
            int64_t last);
  // Writes sample s, positions [from, ...) of `row` (pack_samples of its batch), at token `at`.
  void place(const Sample& s, const PackedBatch& row, int64_t from, int64_t at,
             const Dataset& dataset);

  // The temporary file and its mapping, released however the constructor ends.
  struct Mapping {
    int fd = -1;
    void* data = nullptr;
    size_t bytes = 0;
    Mapping() = default;
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    ~Mapping();
  };

  std::vector<int64_t> pack_starts_;
  Mapping file_;
  int32_t* tokens_ = nullptr;
  int8_t* weights_ = nullptr;
};

}  // namespace thdpack::detail
