#pragma once
// The --workload / --dataset-config / --lengths / --jsonl / --parquet / --hf-dataset / --seq-length
// flags shared by the subcommands that read a dataset, and what they resolve to.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "thdpack/core/dataset.hpp"
#include "thdpack/data/input_file.hpp"
#include "thdpack/data/pack_file.hpp"
#include "thdpack/packing/offline_packing.hpp"

namespace thdpack::cli {

struct WorkloadFlags {
  std::string workload;
  std::string dataset_config;  // inline JSON or a file holding it
  std::string lengths_file;
  std::string jsonl_file;
  std::vector<std::string> parquet_paths;     // files, folders or globs: one dataset
  std::vector<std::string> hf_dataset_paths;  // save_to_disk folders, Arrow files or globs
  bool bridge_packed = false;                 // rows are Megatron-Bridge packs
  std::string tokens_column = "input_ids";
  std::string loss_mask_column;
  std::string labels_column;
  std::string data_path;  // Megatron indexed dataset prefix, or "w1 prefix1 w2 prefix2 ..."
  int64_t seq_length = 0;
  bool jsonl_ignore_unknown_keys = false;
  bool labels_shifted = false;  // JSONL "labels" or --labels-column hold each position's target

  /// Registers the flags on `command`.
  void add_to(CLI::App& command);
  /// How many of the sources above are given.
  int sources_given() const;
};

/// Throws InvalidArgument when no source is given: a command that writes data (pack, convert) must
/// not silently read the default mock. `command` names it in the message.
void require_source(const WorkloadFlags& flags, const std::string& command);

/// A dataset plus the defaults its source implies.
struct ResolvedWorkload {
  std::string name;  ///< workload name, or a short description of the source
  std::string description;
  std::unique_ptr<Dataset> dataset;
  std::optional<int64_t> max_seqlen_per_dp_cp_rank;  ///< named workloads and --seq-length
  std::optional<int> cp;                             ///< named workloads
  std::optional<std::string> workload_name;          ///< for default_global_batch
  PackSource source;  ///< how to reopen the dataset (recorded in pack files)
  /// source_fingerprint of the files the dataset was read from (all but named workloads), so
  /// that a pack file records what was read rather than what is at the paths when it is written.
  std::optional<uint64_t> source_fingerprint;
  /// Files read that the dataset does not hold itself (a --dataset-config file): leased as inputs
  /// in use, so no output of the command replaces them.
  std::vector<std::shared_ptr<const InputLease>> inputs;
};

/// Resolves the flags; the default (none given) is the sft-8k workload (plan and run). Throws
/// InvalidArgument when more than one source is given or a source is bad.
ResolvedWorkload resolve_workload(const WorkloadFlags& flags);

}  // namespace thdpack::cli
