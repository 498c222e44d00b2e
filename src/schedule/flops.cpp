#include "thdpack/schedule/flops.hpp"

#include <string>
#include <utility>

#include "core/name_lookup.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

const std::vector<ModelSpec>& presets() {
  // Public configurations of well-known models (hidden, layers, heads, kv heads, head dim, ffn,
  // vocab, SwiGLU, top-k), plus a tiny model for examples and tests.
  static const std::vector<ModelSpec> kPresets = {
      {"llama3-8b", 4096, 32, 32, 8, 128, 14336, 128256, true, 1},
      {"llama3-70b", 8192, 80, 64, 8, 128, 28672, 128256, true, 1},
      {"mixtral-8x7b", 4096, 32, 32, 8, 128, 14336, 32000, true, 2},
      {"qwen3-30b-a3b", 2048, 48, 32, 4, 128, 768, 151936, true, 8},
      {"tiny-gpt", 256, 4, 4, 4, 64, 1024, 32000, false, 1},
  };
  return kPresets;
}

}  // namespace

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const auto& p : presets()) names.push_back(p.name);
  return names;
}

ModelSpec model_preset(const std::string& name) {
  for (const auto& p : presets()) {
    if (p.name == name) return p;
  }
  detail::throw_unknown_name("model preset", name, model_preset_names());
}

FlopsCoefficients training_flops_coefficients(const ModelSpec& m) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"hidden", m.hidden},     {"layers", m.layers}, {"heads", m.heads}, {"kv_heads", m.kv_heads},
      {"head_dim", m.head_dim}, {"ffn", m.ffn},       {"vocab", m.vocab}, {"moe_topk", m.moe_topk}};
  for (const auto& [field, value] : sizes) {
    check(value > 0, "model '", m.name, "': ", field, " must be > 0, got ", value,
          " (every size must be > 0)");
  }
  const double h = static_cast<double>(m.hidden);
  const double layers = static_cast<double>(m.layers);
  const double q = static_cast<double>(m.heads * m.head_dim);
  const double kv = static_cast<double>(m.kv_heads * m.head_dim);
  const double f = static_cast<double>(m.ffn);
  const double g = m.swiglu ? 3.0 : 2.0;
  const double k = static_cast<double>(m.moe_topk);
  const double v = static_cast<double>(m.vocab);
  const double per_layer = 2 * h * (q + 2 * kv) + 2 * q * h + 2 * h * f * g * k;
  const double forward_linear = layers * per_layer + 2 * h * v;
  const double forward_quadratic = layers * 2 * q;
  return {3.0 * forward_linear, 3.0 * forward_quadratic};
}

double training_flops(const ModelSpec& model, double s1, double s2) {
  const FlopsCoefficients c = training_flops_coefficients(model);
  return c.per_token * s1 + c.per_token_squared * s2;
}

}  // namespace thdpack
