#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Mock datasets (Megatron's `--sft-mock-dataset-config-json`, SPEC §2): lengths drawn from a
// seeded distribution, or read from a file of lengths; token content is deterministic.

#include <cstdint>
#include <memory>
#include <string>

#include "thdpack/core/dataset.hpp"

namespace thdpack {

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
/// InvalidArgument naming the key, and so do a NUL byte, a key given twice, nesting deeper than
/// 256 levels and invalid JSON; messages quote at most 80 characters of a value and name `source`
/// (the config file) when it is given. A leading UTF-8 BOM is skipped. A relative "path" is resolved
/// against `base_dir` if non-empty.
MockConfig parse_mock_config(const std::string& json_text, const std::string& base_dir = "",
                             const std::string& source = "");

/// Throws InvalidArgument when a config's values are out of range (as parse_mock_config checks).
void validate(const MockConfig& config);

/// Serialises a config back to JSON (round-trips through parse_mock_config).
std::string to_json(const MockConfig& config);

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

}  // namespace thdpack
