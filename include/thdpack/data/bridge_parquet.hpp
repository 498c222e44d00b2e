#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Packs as Megatron-Bridge's packed-SFT Parquet (SPEC §11): one row per pack with
// `input_ids list<int32>` (the pack's samples back to back, no padding), `loss_mask list<int8>`
// (position j's loss weight: 1 where position j predicts a trained token j+1 of the same sample)
// and `seq_start_id list<int32>` (where each sample starts in the row), the files
// Megatron-Bridge's GPTSFTPackedParquetDataset reads. Part of the Parquet library
// (thdpack_parquet); a build without Parquet support throws one line saying how to enable it.

#include <cstdint>
#include <string>
#include <vector>

#include "thdpack/core/dataset.hpp"
#include "thdpack/packing/bin_packing.hpp"

namespace thdpack {

struct BridgeParquetOptions {
  int64_t packs_per_shard = 10000;  ///< rows of each file (the last may hold fewer)
  int64_t packs_per_row_group = 500;
};

/// Writes pack p of `packs` (sample indices of `dataset`) as row p, across the files
/// `folder`/shard-00000.idx.parquet, shard-00001.idx.parquet, ... (created with the folder if
/// missing), and returns their paths. Each file is an OutputFile: complete before it replaces
/// anything, and handed to the DeferredCommits scope of the caller if there is one. The source
/// is read once, in index order, many samples at a time (Dataset::samples), into a temporary
/// unnamed file in `folder` holding every pack's tokens and weights in pack order (5 bytes a
/// token, its space reserved before any is written, mapped, gone when the call returns); the rows
/// are cut out of it without a copy. A sample's loss mask and
/// labels become the row's loss_mask as pack_samples makes them (the last position of each sample
/// 0). Throws InvalidArgument when `folder` already holds a *.parquet file (Megatron-Bridge would
/// read it as part of the dataset), a token id does not fit int32, a pack (or a row group's packs)
/// holds more than 2^31 - 1 tokens, a sample's labels train on something other than its next token
/// (the format has no labels column), or the temporary file cannot be made (no room for it).
std::vector<std::string> write_bridge_parquet(const Dataset& dataset, const Bins& packs,
                                              const std::string& folder,
                                              const BridgeParquetOptions& options = {});

}  // namespace thdpack
