#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Offline packing of a whole dataset into packs of capacity C (what `thdpack pack` does) and a
// streaming packer with a bounded number of open packs for use inside data loaders. The pack file
// that stores the result is in thdpack/data/pack_file.hpp.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "thdpack/packing/bin_packing.hpp"

namespace thdpack {

enum class PackStrategy {
  kBestFitDecreasing,  ///< thdpack's packer: O(n + C), lands on the L2 bound in practice
  kFirstFitDecreasing,
  kNextFit,  ///< input order (streaming-friendly, the weakest fill)
};

/// "bfd", "ffd", "next-fit".
PackStrategy pack_strategy_from_name(const std::string& name);
std::string pack_strategy_name(PackStrategy strategy);

struct OfflinePackOptions {
  int64_t capacity = 0;  ///< C, in padded tokens
  PackStrategy strategy = PackStrategy::kBestFitDecreasing;
  int64_t divisor = 1;  ///< each sample is padded to a multiple of this
  /// Seeded shuffle: the order of the packs (decreasing strategies; the packing itself, and so its
  /// fill, is unchanged) or the order of the samples (next-fit). No shuffle when unset.
  std::optional<uint64_t> shuffle_seed = {};
  /// Optional, one per sample: samples with the same id are packed together (GRPO groups,
  /// preference pairs). A group longer than C is an InvalidArgument.
  std::span<const int64_t> group_ids = {};
};

struct OfflinePacking {
  Bins packs;  ///< sample indices (positions in the input lengths) of each pack
  int64_t padded_tokens = 0;
  int64_t lower_bound_l1 = 0;
  int64_t lower_bound_l2 = 0;
  double fill = 0;  ///< padded tokens / (packs · C)
};

/// Packs samples of the given real lengths. Throws InvalidArgument when a sample (or group) does
/// not fit the capacity or a length is < 1.
OfflinePacking pack_offline(std::span<const int64_t> lengths, const OfflinePackOptions& options);

/// Packs a stream with at most `max_open_packs` packs open: each sample goes to the open pack with
/// the least room that fits it; when none fits a pack is opened, and when too many are open the
/// fullest is closed. Memory stays O(max_open_packs + samples in open packs).
class StreamingPacker {
 public:
  StreamingPacker(int64_t capacity, int64_t max_open_packs, int64_t divisor = 1);
  /// Adds sample `id` of `length` tokens; packs it closes are appended to `closed`.
  void add(int64_t id, int64_t length, std::vector<std::vector<int64_t>>& closed);
  /// Closes every open pack (fullest first) into `closed`.
  void flush(std::vector<std::vector<int64_t>>& closed);
  int64_t open_packs() const { return static_cast<int64_t>(open_.size()); }

 private:
  struct OpenPack {
    std::vector<int64_t> ids;
    int64_t used = 0;
  };
  void close(size_t index, std::vector<std::vector<int64_t>>& closed);

  int64_t capacity_;
  int64_t max_open_;
  int64_t divisor_;
  std::vector<OpenPack> open_;
};

}  // namespace thdpack
