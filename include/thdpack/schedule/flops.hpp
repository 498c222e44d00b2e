#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Model shapes and their training FLOPs.
//
// FLOPs formula (SPEC §6), for samples with S1 = Σ L and S2 = Σ L²:
//   forward = layers · [ 2·S1·h·(q + 2·kv) + 2·q·S2 + 2·S1·q·h + 2·S1·h·f·g·k ] + 2·S1·h·V
//   training = 3 · forward
// where q = heads·head_dim, kv = kv_heads·head_dim, f = ffn width, g = 3 with SwiGLU else 2,
// k = MoE top-k (1 for dense). The attention term 2·q·S2 is QKᵀ plus AV with causal halving.

#include <cstdint>
#include <string>
#include <vector>

namespace thdpack {

/// Shape of a decoder-only transformer. All sizes > 0.
struct ModelSpec {
  std::string name;
  int64_t hidden = 0;
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t ffn = 0;  ///< FFN width (per expert for MoE)
  int64_t vocab = 0;
  bool swiglu = true;
  int64_t moe_topk = 1;  ///< experts per token (1 for dense)
};

/// Names of the built-in presets, e.g. "llama3-8b", "llama3-70b", "mixtral-8x7b".
std::vector<std::string> model_preset_names();
/// The preset called `name`; throws InvalidArgument listing the names when unknown.
ModelSpec model_preset(const std::string& name);

/// Training FLOPs of one sequence of length L are per_token·L + per_token_squared·L².
struct FlopsCoefficients {
  double per_token = 0;
  double per_token_squared = 0;
};

/// Coefficients of the training (3× forward) FLOPs; throws InvalidArgument on a size <= 0.
FlopsCoefficients training_flops_coefficients(const ModelSpec& model);

/// Training FLOPs (3× forward) of samples with S1 = Σ L and S2 = Σ L² (as doubles: S2 of a global
/// batch exceeds 2^53 only beyond ~10^11 tokens).
double training_flops(const ModelSpec& model, double s1, double s2);

/// Sums of sequence lengths over a set of samples, as Megatron reports them for its FLOPs figure.
struct LengthSums {
  double s1_real = 0;    ///< Σ real L
  double s2_real = 0;    ///< Σ real L²
  double s1_padded = 0;  ///< Σ padded L
  double s2_padded = 0;  ///< Σ padded L²

  void add(int64_t real, int64_t padded) {
    s1_real += static_cast<double>(real);
    s2_real += static_cast<double>(real) * static_cast<double>(real);
    s1_padded += static_cast<double>(padded);
    s2_padded += static_cast<double>(padded) * static_cast<double>(padded);
  }
};

}  // namespace thdpack
