#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// The per-sample cost model used for balancing: the training FLOPs of one sample (flops.hpp) or
// direct coefficients.

#include <cstdint>

#include "thdpack/schedule/flops.hpp"

namespace thdpack {

/// cost(L) = linear·L + quadratic·L². Units are whatever the coefficients carry (training FLOPs for
/// a model-derived cost). Costs must be non-decreasing in L, so coefficients are >= 0.
struct CostModel {
  double linear = 1.0;
  double quadratic = 0.0;

  double cost(int64_t length) const {
    const auto l = static_cast<double>(length);
    return linear * l + quadratic * l * l;
  }

  /// The cost whose value for one sample equals training_flops(model, L, L²).
  static CostModel from_model(const ModelSpec& model);
  /// Direct coefficients; throws InvalidArgument when negative or both zero.
  static CostModel from_coefficients(double linear, double quadratic);
};

}  // namespace thdpack
