#include "workload_source.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "thdpack/errors.hpp"
#include "thdpack/workloads.hpp"

namespace thdpack::cli {

void WorkloadFlags::add_to(CLI::App& command) {
  std::string names;
  for (const auto& n : workload_names()) names += (names.empty() ? "" : ", ") + n;
  command.add_option("--workload", workload, "named workload: " + names + " (default sft-8k)");
  command.add_option("--dataset-config", dataset_config,
                     "mock dataset config: inline JSON or a file holding it (Megatron's "
                     "--sft-mock-dataset-config-json keys)");
  command.add_option("--lengths", lengths_file, "file of sample lengths, one per line");
  command.add_option(
      "--jsonl", jsonl_file,
      "pre-tokenized JSONL: {\"input_ids\":[...]} with optional loss_mask or labels");
  command.add_option("--seq-length", seq_length,
                     "Megatron's default mock for sequence length S (lognormal, [S/2, S], mean "
                     "S//4*3, sigma 1.1); also sets the default cap M = S");
  command.add_flag("--jsonl-ignore-unknown-keys", jsonl_ignore_unknown_keys,
                   "skip JSONL keys other than input_ids, loss_mask, labels");
}

ResolvedWorkload resolve_workload(const WorkloadFlags& f) {
  const int sources = !f.workload.empty() + !f.dataset_config.empty() + !f.lengths_file.empty() +
                      !f.jsonl_file.empty() + (f.seq_length > 0);
  if (sources > 1) {
    throw InvalidArgument(
        "give one workload source: --workload, --dataset-config, --lengths, --jsonl or "
        "--seq-length");
  }
  ResolvedWorkload r;
  if (!f.dataset_config.empty()) {
    std::string text = f.dataset_config;
    std::string base_dir;
    const bool inline_json = text.find('{') != std::string::npos;
    if (!inline_json) {
      std::ifstream in(text);
      if (!in)
        throw InvalidArgument("--dataset-config: '" + text +
                              "' is neither JSON nor a readable file");
      std::stringstream buffer;
      buffer << in.rdbuf();
      base_dir = std::filesystem::path(text).parent_path().string();
      text = buffer.str();
    }
    const MockConfig config = parse_mock_config(text, base_dir);
    r.dataset = make_mock_dataset(config);
    r.name = "dataset-config";
    r.description = r.dataset->describe();
    return r;
  }
  if (!f.lengths_file.empty()) {
    MockConfig config;
    config.mode = MockConfig::Mode::kFile;
    config.path = f.lengths_file;
    r.dataset = make_mock_dataset(config);
    r.name = "lengths";
    r.description = r.dataset->describe();
    return r;
  }
  if (!f.jsonl_file.empty()) {
    JsonlOptions options;
    options.ignore_unknown_keys = f.jsonl_ignore_unknown_keys;
    r.dataset = load_jsonl_dataset(f.jsonl_file, options);
    r.name = "jsonl";
    r.description = r.dataset->describe();
    return r;
  }
  if (f.seq_length > 0) {
    r.dataset = make_mock_dataset(default_mock_config(f.seq_length));
    r.name = "mock-seq-" + std::to_string(f.seq_length);
    r.description = "Megatron default mock for S=" + std::to_string(f.seq_length);
    r.max_seqlen_per_dp_cp_rank = f.seq_length;
    return r;
  }
  const Workload w = workload(f.workload.empty() ? "sft-8k" : f.workload);
  r.dataset = make_mock_dataset(w.dataset);
  r.name = w.name;
  r.description = w.description;
  r.max_seqlen_per_dp_cp_rank = w.max_seqlen_per_dp_cp_rank;
  r.cp = w.cp;
  r.workload_name = w.name;
  return r;
}

}  // namespace thdpack::cli
