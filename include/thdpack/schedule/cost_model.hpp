#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// The one cost model of every scheduler: what a sample costs, whole (balancing with fixed CP), and
// the time it takes one rank of a CP group of c ranks (dynamic CP, and every modeled step).
//
//   cost(L)    = linear·L + quadratic·L²       (training FLOPs of the sample, or work units)
//   time(L, c) = compute + exposed + overhead, in seconds (or units):
//   compute    = cost(L) / c / flops_per_second
//   comm       = passes · (c−1)/c · kv_bytes_per_token · L / link_bytes_per_second
//   exposed    = max(0, comm − quadratic·L²/c / flops_per_second)
//   overhead   = step_overhead_seconds · layers · c
//
// compute is the sample's cost split evenly over the group (zigzag CP). Ring attention passes each
// rank's K/V (kv_bytes_per_token = 2·kv_heads·head_dim·bytes·layers per token) around the ring:
// every rank receives (c−1)/c of the sample's K/V in the forward pass and, in the backward pass,
// K/V again plus their gradients (passes = 3). Each ring step overlaps its transfer with the
// attention of the chunk it holds, so only the part of the transfer that outlasts the rank's
// attention compute (the quadratic term) is exposed. Each ring step also pays a fixed cost per
// layer (kernel launches, synchronisation): c steps per layer; with c = 1 it is the attention
// kernel's own launch. That term makes tiny chunks inefficient.
//
// A model built from coefficients alone (CostModel{linear, quadratic}) has no communication or
// overhead and one unit per second: time(L, c) = cost(L) / c. Megatron's dynamic-CP workload L²/c
// is megatron_workload(). docs/schedulers.md gives the defaults and their sources.

#include <cstdint>
#include <string>

#include "thdpack/schedule/flops.hpp"

namespace thdpack {

struct CostModel {
  double linear = 1.0;            ///< cost per token; costs must be non-decreasing in L: both >= 0
  double quadratic = 0.0;         ///< cost per token squared
  double flops_per_second = 1.0;  ///< achieved per GPU
  double kv_bytes_per_token = 0.0;   ///< K and V of all layers
  double passes = 3.0;               ///< forward K/V, backward K/V and dK/dV
  double link_bytes_per_second = 0;  ///< per rank, ring direction; 0 turns communication off
  double step_overhead_seconds = 0;  ///< per ring step and layer
  int64_t layers = 1;

  /// cost(L): what the whole sample costs (FLOPs for a model-derived model).
  double cost(int64_t length) const {
    const auto l = static_cast<double>(length);
    return linear * l + quadratic * l * l;
  }
  /// Modeled seconds (or units) one rank of a group of `cp` ranks spends on a sample of `length`.
  double time(int64_t length, int cp) const;
  /// cp·time: the rank-seconds a sample occupies.
  double area(int64_t length, int cp) const { return cp * time(length, cp); }

  /// The cost whose value for one sample equals training_flops(model, L, L²); compute only.
  static CostModel from_model(const ModelSpec& model);
  /// Direct coefficients; throws InvalidArgument when negative or both zero.
  static CostModel from_coefficients(double linear, double quadratic);
  /// Megatron's default_dynamic_cp workload: L²/c.
  static CostModel megatron_workload();
  /// From a model preset: training FLOPs at `tflops` TFLOP/s per GPU, K/V of `bytes_per_value`
  /// bytes (2 for bf16), a ring link of `link_gbytes_per_second` GB/s (0: no communication
  /// cost), and `step_overhead_us` microseconds per ring step and layer. Throws InvalidArgument
  /// on values that are negative, not finite, or (tflops) not positive.
  static CostModel from_model(const ModelSpec& model, double tflops, int bytes_per_value,
                              double link_gbytes_per_second, double step_overhead_us);
  /// The model `thdpack plan` and the pipeline give the dynamic-CP schedulers: from_model of the
  /// preset `model_name` with bf16 K/V when it is not empty; otherwise the coefficients of
  /// `direct` at `tflops` TFLOP/s, compute only (no K/V size is known, so no communication and no
  /// overhead term). Throws InvalidArgument as from_model does, or on an unknown preset.
  static CostModel of_preset_or_coefficients(const std::string& model_name, const CostModel& direct,
                                             double tflops, double link_gbytes_per_second,
                                             double step_overhead_us);
};

/// Defaults of from_model (docs/schedulers.md says where they come from).
inline constexpr double kDefaultGpuTflops = 400.0;
inline constexpr double kDefaultCpLinkGBps = 50.0;
inline constexpr double kDefaultCpStepOverheadUs = 20.0;

}  // namespace thdpack
