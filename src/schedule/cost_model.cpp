#include "thdpack/schedule/cost_model.hpp"

#include <cmath>
#include <string>

#include "thdpack/core/errors.hpp"

namespace thdpack {

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

}  // namespace thdpack
