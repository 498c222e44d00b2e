// The cost model (formula and its reasoning in cost_model.hpp).

#include "thdpack/schedule/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "thdpack/core/errors.hpp"

namespace thdpack {

double CostModel::time(int64_t length, int cp) const {
  const auto l = static_cast<double>(length);
  const double c = cp;
  const double compute_s = cost(length) / c / flops_per_second;
  double exposed_s = 0.0;
  if (link_bytes_per_second > 0 && cp > 1) {
    const double comm_s = passes * (c - 1) / c * kv_bytes_per_token * l / link_bytes_per_second;
    const double attention_s = quadratic * l * l / c / flops_per_second;
    exposed_s = std::max(0.0, comm_s - attention_s);
  }
  return compute_s + exposed_s + step_overhead_seconds * static_cast<double>(layers) * c;
}

CostModel CostModel::from_model(const ModelSpec& model) {
  const FlopsCoefficients c = training_flops_coefficients(model);
  return CostModel{c.per_token, c.per_token_squared};
}

CostModel CostModel::from_coefficients(double linear, double quadratic) {
  if (!std::isfinite(linear) || !std::isfinite(quadratic) || linear < 0 || quadratic < 0 ||
      (linear == 0 && quadratic == 0)) {
    fail("cost coefficients must be finite, >= 0 and not both 0 (got linear=",
         std::to_string(linear), ", quadratic=", std::to_string(quadratic), ")");
  }
  return CostModel{linear, quadratic};
}

CostModel CostModel::megatron_workload() {
  return CostModel{0.0, 1.0};
}

CostModel CostModel::from_model(const ModelSpec& model, double tflops, int bytes_per_value,
                                double link_gbytes_per_second, double step_overhead_us) {
  auto bad = [](double v) { return !std::isfinite(v) || v < 0; };
  if (bad(tflops) || tflops == 0 || bytes_per_value < 1 || bad(link_gbytes_per_second) ||
      bad(step_overhead_us)) {
    throw InvalidArgument(
        "CP cost model: TFLOP/s must be > 0, bytes per value >= 1, link GB/s and "
        "step overhead >= 0 and finite");
  }
  CostModel m = from_model(model);
  m.flops_per_second = tflops * 1e12;
  m.kv_bytes_per_token = 2.0 * static_cast<double>(model.kv_heads * model.head_dim) *
                         bytes_per_value * static_cast<double>(model.layers);
  m.link_bytes_per_second = link_gbytes_per_second * 1e9;
  m.step_overhead_seconds = step_overhead_us * 1e-6;
  m.layers = model.layers;
  return m;
}

CostModel CostModel::of_preset_or_coefficients(const std::string& model_name,
                                               const CostModel& direct, double tflops,
                                               double link_gbytes_per_second,
                                               double step_overhead_us) {
  if (!model_name.empty()) {
    return from_model(model_preset(model_name), tflops, 2, link_gbytes_per_second,
                      step_overhead_us);
  }
  if (!(tflops > 0) || !std::isfinite(tflops)) {
    throw InvalidArgument("GPU TFLOP/s must be positive and finite");
  }
  CostModel m{direct.linear, direct.quadratic};
  m.flops_per_second = tflops * 1e12;
  return m;
}

}  // namespace thdpack
