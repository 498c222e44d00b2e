#include "flags/workload_source.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "flags/flag_values.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/arrow_dataset.hpp"
#include "thdpack/data/indexed_dataset.hpp"
#include "thdpack/data/jsonl_dataset.hpp"
#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/data/parquet_dataset.hpp"
#include "thdpack/data/workloads.hpp"

namespace thdpack::cli {
namespace {

// Prefixes made absolute, weights kept: pack files must reopen their source from anywhere.
std::string absolute_data_path(const std::string& data_path) {
  std::istringstream in(data_path);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    const bool prefix = words.size() == 1 || i % 2 == 1;
    out += (out.empty() ? "" : " ") +
           (prefix ? std::filesystem::absolute(words[i]).string() : words[i]);
  }
  return out;
}

// The dataset of `source`, each of its files opened by path once, and the fingerprint of what was
// read (recorded by `pack`).
void open_once(ResolvedWorkload& r, const PackSource& source, const JsonlOptions& options = {}) {
  OpenedPackSource opened = open_pack_source_once(source, options);
  r.dataset = std::move(opened.dataset);
  r.source_fingerprint = opened.fingerprint;
}

// The files are listed once (folders and globs expanded) and recorded by absolute path, so a pack
// file reopens exactly them. --parquet and --hf-dataset differ only in the files' format.
ResolvedWorkload resolve_table(const WorkloadFlags& f) {
  ParquetOptions options;
  options.tokens_column = f.tokens_column;
  options.loss_mask_column = f.loss_mask_column;
  options.labels_column = f.labels_column;
  options.labels_shifted = f.labels_shifted;
  if (f.bridge_packed) {
    options.layout = TableLayout::kBridgePacked;
    if (options.loss_mask_column.empty()) options.loss_mask_column = "loss_mask";
  }
  const bool parquet = !f.parquet_paths.empty();
  if (!parquet_supported()) {  // says how to enable
    if (parquet) load_parquet_dataset(f.parquet_paths, options);
    load_arrow_dataset(f.hf_dataset_paths, options);
  }
  const PackSource source =
      parquet ? PackSource{"parquet",
                           parquet_source_spec(expand_parquet_paths(f.parquet_paths), options), 0}
              : PackSource{"arrow",
                           arrow_source_spec(expand_arrow_paths(f.hf_dataset_paths), options), 0};
  ResolvedWorkload r;
  open_once(r, source);
  r.source = source;
  r.name = parquet ? "parquet" : "hf-dataset";
  r.description = r.dataset->describe();
  return r;
}

ResolvedWorkload resolve_source(const WorkloadFlags& f) {
  ResolvedWorkload r;
  if (!f.data_path.empty()) {
    open_once(r, {"indexed", f.data_path, 0});
    r.name = "indexed";
    r.description = r.dataset->describe();
    r.source = {"indexed", absolute_data_path(f.data_path), 0};
    return r;
  }
  if (!f.dataset_config.empty()) {
    std::string text = f.dataset_config;
    std::string base_dir;
    const bool inline_json = text.find('{') != std::string::npos;
    if (!inline_json) {
      if (!std::filesystem::exists(text)) {
        fail("--dataset-config: '", text, "' is neither JSON nor a readable file");
      }
      const auto lease = std::make_shared<InputLease>(text, "--dataset-config file");
      r.inputs.push_back(lease);
      base_dir = std::filesystem::path(text).parent_path().string();
      text = lease->file().read_all(kMaxConfigFileBytes);
    }
    const MockConfig config =
        parse_mock_config(text, base_dir, inline_json ? "" : f.dataset_config);
    open_once(r, {"mock", to_json(config), 0});
    r.source = {"mock", to_json(config), 0};
    r.name = "dataset-config";
    r.description = r.dataset->describe();
    return r;
  }
  if (!f.lengths_file.empty()) {
    MockConfig config;
    config.mode = MockConfig::Mode::kFile;
    config.path = std::filesystem::absolute(f.lengths_file).string();
    open_once(r, {"mock", to_json(config), 0});
    r.source = {"mock", to_json(config), 0};
    r.name = "lengths";
    r.description = r.dataset->describe();
    return r;
  }
  if (!f.jsonl_file.empty()) {
    JsonlOptions options;
    options.ignore_unknown_keys = f.jsonl_ignore_unknown_keys;
    options.labels_shifted = f.labels_shifted;
    open_once(r, {"jsonl", f.jsonl_file, 0}, options);
    r.source = {"jsonl", std::filesystem::absolute(f.jsonl_file).string(), 0};
    r.name = "jsonl";
    r.description = r.dataset->describe();
    return r;
  }
  if (!f.parquet_paths.empty() || !f.hf_dataset_paths.empty()) return resolve_table(f);
  if (f.seq_length > 0) {
    r.dataset = make_mock_dataset(default_mock_config(f.seq_length));
    r.source = {"mock", to_json(default_mock_config(f.seq_length)), 0};
    r.name = "mock-seq-" + std::to_string(f.seq_length);
    r.description = "Megatron default mock for S=" + std::to_string(f.seq_length);
    r.max_seqlen_per_dp_cp_rank = f.seq_length;
    return r;
  }
  const Workload w = workload(f.workload.empty() ? "sft-8k" : f.workload);
  r.dataset = make_mock_dataset(w.dataset);
  r.source = {"mock", to_json(w.dataset), 0};
  r.name = w.name;
  r.description = w.description;
  r.max_seqlen_per_dp_cp_rank = w.max_seqlen_per_dp_cp_rank;
  r.cp = w.cp;
  r.workload_name = w.name;
  return r;
}

}  // namespace

void WorkloadFlags::add_to(CLI::App& command) {
  std::string names;
  for (const auto& n : workload_names()) names += (names.empty() ? "" : ", ") + n;
  command
      .add_option("--workload", workload,
                  "named workload: " + names + " (plan and run default to sft-8k)")
      ->check(non_empty());
  command
      .add_option("--dataset-config,--sft-mock-dataset-config-json", dataset_config,
                  "mock dataset config: inline JSON or a file holding it (Megatron's "
                  "--sft-mock-dataset-config-json keys)")
      ->check(non_empty());
  command.add_option("--lengths", lengths_file, "file of sample lengths, one per line")
      ->check(non_empty());
  command
      .add_option("--jsonl", jsonl_file,
                  "pre-tokenized JSONL: {\"input_ids\":[...]} with optional loss_mask or labels")
      ->check(non_empty());
  command
      .add_option("--parquet", parquet_paths,
                  "pre-tokenized Parquet: files, folders (every *.parquet, sorted) or globs, read "
                  "as one dataset in order; one row per sample")
      ->expected(1, -1)
      ->check(non_empty());
  command
      .add_option("--hf-dataset", hf_dataset_paths,
                  "a Hugging Face datasets folder (Dataset.save_to_disk: its Arrow files in "
                  "state.json's order), Arrow IPC files or globs, read as one dataset; one row "
                  "per sample; takes the column flags as --parquet does")
      ->expected(1, -1)
      ->check(non_empty());
  command.add_flag("--bridge-packed", bridge_packed,
                   "the --parquet or --hf-dataset rows are Megatron-Bridge packs (what pack "
                   "--parquet-out writes: input_ids, loss_mask, seq_start_id): each row gives "
                   "back its samples");
  command
      .add_option("--tokens-column", tokens_column,
                  "Parquet column of token ids (list of integers; default input_ids)")
      ->check(non_empty());
  command
      .add_option("--loss-mask-column", loss_mask_column,
                  "Parquet column of 0/1 loss-mask lists (optional)")
      ->check(non_empty());
  command
      .add_option("--labels-column", labels_column,
                  "Parquet column of label lists, -100 where ignored (optional)")
      ->check(non_empty());
  command
      .add_option("--data-path", data_path,
                  "Megatron indexed dataset: a prefix (prefix.bin + prefix.idx) or a blend "
                  "\"w1 prefix1 w2 prefix2 ...\"")
      ->check(non_empty());
  command
      .add_option("--seq-length", seq_length,
                  "Megatron's default mock for sequence length S (lognormal, [S/2, S], mean "
                  "S//4*3, sigma 1.1); also sets the default cap M = S")
      ->check(positive_integer());
  command.add_flag("--jsonl-ignore-unknown-keys", jsonl_ignore_unknown_keys,
                   "skip JSONL keys other than input_ids, loss_mask, labels");
  command.add_flag("--labels-shifted", labels_shifted,
                   "the labels (JSONL \"labels\", or --labels-column) are already shifted: label j "
                   "is position j's target, as Megatron's SFT datasets store them (default: "
                   "aligned with the tokens, as Hugging Face datasets store them)");
}

int WorkloadFlags::sources_given() const {
  return !workload.empty() + !dataset_config.empty() + !lengths_file.empty() + !jsonl_file.empty() +
         !parquet_paths.empty() + !hf_dataset_paths.empty() + !data_path.empty() + (seq_length > 0);
}

void require_source(const WorkloadFlags& flags, const std::string& command) {
  if (flags.sources_given() == 0) {
    fail(command,
         " needs data: --jsonl FILE, --parquet PATH, --hf-dataset DIR, --data-path PREFIX, "
         "--lengths FILE or "
         "--dataset-config JSON, or --workload NAME for a built-in mock "
         "(thdpack list names them)");
  }
}

ResolvedWorkload resolve_workload(const WorkloadFlags& f) {
  if (f.sources_given() > 1) {
    throw InvalidArgument(
        "give one workload source: --workload, --dataset-config, --lengths, --jsonl, --parquet, "
        "--hf-dataset, --data-path or --seq-length");
  }
  if (f.labels_shifted && f.jsonl_file.empty() && f.labels_column.empty()) {
    throw InvalidArgument(
        "--labels-shifted says how labels are stored: give --jsonl FILE, or --labels-column "
        "with --parquet PATH or --hf-dataset DIR");
  }
  if (f.parquet_paths.empty() && f.hf_dataset_paths.empty() &&
      (f.tokens_column != "input_ids" || !f.loss_mask_column.empty() || !f.labels_column.empty() ||
       f.bridge_packed)) {
    throw InvalidArgument(
        "--tokens-column, --loss-mask-column, --labels-column and --bridge-packed choose "
        "Parquet or Arrow columns: give --parquet PATH or --hf-dataset DIR too");
  }
  ResolvedWorkload r = resolve_source(f);
  r.source.size = r.dataset->size();
  return r;
}

}  // namespace thdpack::cli
