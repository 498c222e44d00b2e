#pragma once
// Datasets: where samples and their lengths come from (SPEC §2).
//
// - Mock datasets (Megatron's `--sft-mock-dataset-config-json`): lengths drawn from a seeded
//   distribution, or read from a file of lengths; token content is deterministic.
// - Pre-tokenized JSONL: {"input_ids":[...]} with optional "loss_mask" or "labels".
//
// Every dataset answers length(i) without materialising tokens, so planning a workload costs
// nothing more than reading lengths.

#include <cstdint>
#include <memory>
#include <optional>
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
  /// One line for logs: kind, source and size.
  virtual std::string describe() const = 0;
};

/// How mock lengths are distributed.
enum class LengthDistributionType { kLognormal, kUniform, kBimodal };

/// Parameters of a mock dataset: Megatron's config keys plus a few of ours.
struct MockConfig {
  enum class Mode { kDistribution, kFile };
  Mode mode = Mode::kDistribution;
  LengthDistributionType type = LengthDistributionType::kLognormal;
  int64_t min_seq_len = 0;  ///< lognormal: clip floor; uniform: lower end (inclusive)
  int64_t max_seq_len = 0;  ///< lognormal: clip ceiling; uniform: upper end (inclusive)
  double mean_seq_len = 0;  ///< lognormal: mean before clipping
  double lognormal_sigma = 0;
  // bimodal: a mix of two uniform ranges
  int64_t short_min = 0, short_max = 0, long_min = 0, long_max = 0;
  double long_fraction = 0;
  int64_t size = 1'000'000;  ///< number of samples (distribution mode)
  uint64_t seed = 0;
  std::string path;  ///< file mode: one length per line
};

/// Megatron's default mock config for sequence length `seq_length`: lognormal with min S/2, max S,
/// mean S//4*3, sigma 1.1. Throws InvalidArgument when seq_length < 4 (the mean S//4*3 would be 0).
MockConfig default_mock_config(int64_t seq_length);

/// Parses a config JSON (Megatron's keys: mode, type, min_seq_len, max_seq_len, mean_seq_len,
/// lognormal_sigma, path; ours: size, seed, and for type "bimodal" short_min, short_max, long_min,
/// long_max, long_fraction). Unknown keys, wrong types and out-of-range values throw
/// InvalidArgument naming the key. A relative "path" is resolved against `base_dir` if non-empty.
MockConfig parse_mock_config(const std::string& json_text, const std::string& base_dir = "");

/// Throws InvalidArgument when a config's values are out of range (as parse_mock_config checks).
void validate(const MockConfig& config);

/// Serialises a config back to JSON (round-trips through parse_mock_config).
std::string to_json(const MockConfig& config);

/// Reads a lengths file: one positive integer per line; an optional non-numeric header line first;
/// blank lines are skipped. Anything else throws InvalidArgument naming the file and line.
std::vector<int64_t> read_lengths_file(const std::string& path);

/// Token content of mock samples.
struct MockContent {
  int64_t vocab_size = 32000;  ///< tokens are in [2, vocab_size)
  int64_t eod_id = 1;          ///< last token of every sample
};

/// Mock token j of sample `index` with `length` tokens: 2 + (index + j) mod (vocab_size - 2) for
/// j < length-1, eod_id for the last. Deterministic, so tests can check where every token went.
int64_t mock_token(int64_t index, int64_t j, int64_t length, const MockContent& content);

/// A mock dataset: lengths from a distribution (computed per index in O(1), independent of size)
/// or from a lengths file; tokens from mock_token.
std::unique_ptr<Dataset> make_mock_dataset(const MockConfig& config,
                                           const MockContent& content = {});

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
