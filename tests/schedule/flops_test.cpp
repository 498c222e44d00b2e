// Training FLOPs (SPEC §6; include/thdpack/schedule/flops.hpp) and the cost model derived from it
// (include/thdpack/schedule/cost_model.hpp).

#include "thdpack/schedule/flops.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "expect_throw.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/cost_model.hpp"

namespace thdpack {
namespace {

using test_util::expect_throw_with;

ModelSpec llama3_8b_by_hand() {
  ModelSpec m;
  m.name = "llama3-8b";
  m.hidden = 4096;
  m.layers = 32;
  m.heads = 32;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.ffn = 14336;
  m.vocab = 128256;
  m.swiglu = true;
  m.moe_topk = 1;
  return m;
}

// SPEC §6, written out term by term in long double.
long double spec_training_flops(const ModelSpec& m, long double s1, long double s2) {
  const long double h = m.hidden, l = m.layers, f = m.ffn, v = m.vocab;
  const long double q = static_cast<long double>(m.heads * m.head_dim);
  const long double kv = static_cast<long double>(m.kv_heads * m.head_dim);
  const long double g = m.swiglu ? 3 : 2;
  const long double k = m.moe_topk;
  const long double qkv = 2 * s1 * h * (q + 2 * kv);
  const long double attention = 2 * 2 * q * s2 / 2;
  const long double out_proj = 2 * s1 * q * h;
  const long double mlp = 2 * s1 * h * f * g * k;
  const long double logits = 2 * s1 * h * v;
  const long double forward = l * (qkv + attention + out_proj + mlp) + logits;
  return 3 * forward;
}

void expect_rel_near(double got, long double want, double tol = 1e-12) {
  const long double scale = std::max<long double>(1, std::fabs(want));
  EXPECT_LE(std::fabs(static_cast<long double>(got) - want) / scale, tol)
      << "got " << got << " want " << static_cast<double>(want);
}

void expect_same_spec(const ModelSpec& a, const ModelSpec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.hidden, b.hidden);
  EXPECT_EQ(a.layers, b.layers);
  EXPECT_EQ(a.heads, b.heads);
  EXPECT_EQ(a.kv_heads, b.kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.ffn, b.ffn);
  EXPECT_EQ(a.vocab, b.vocab);
  EXPECT_EQ(a.swiglu, b.swiglu);
  EXPECT_EQ(a.moe_topk, b.moe_topk);
}

// ---------------------------------------------------------------------------------------------
// Presets

TEST(FlopsPresets, Llama3_8bMatchesItsPublishedShape) {
  expect_same_spec(model_preset("llama3-8b"), llama3_8b_by_hand());
}

TEST(FlopsPresets, Llama3_70bAndMixtral) {
  const ModelSpec l70 = model_preset("llama3-70b");
  EXPECT_EQ(l70.hidden, 8192);
  EXPECT_EQ(l70.layers, 80);
  EXPECT_EQ(l70.heads, 64);
  EXPECT_EQ(l70.kv_heads, 8);
  EXPECT_EQ(l70.head_dim, 128);
  EXPECT_EQ(l70.ffn, 28672);
  EXPECT_EQ(l70.vocab, 128256);
  EXPECT_TRUE(l70.swiglu);
  EXPECT_EQ(l70.moe_topk, 1);

  const ModelSpec mx = model_preset("mixtral-8x7b");
  EXPECT_EQ(mx.hidden, 4096);
  EXPECT_EQ(mx.layers, 32);
  EXPECT_EQ(mx.heads, 32);
  EXPECT_EQ(mx.kv_heads, 8);
  EXPECT_EQ(mx.head_dim, 128);
  EXPECT_EQ(mx.ffn, 14336);
  EXPECT_EQ(mx.vocab, 32000);
  EXPECT_TRUE(mx.swiglu);
  EXPECT_EQ(mx.moe_topk, 2);
}

TEST(FlopsPresets, NamesAreUniqueAndEveryPresetIsValid) {
  const std::vector<std::string> names = model_preset_names();
  const std::set<std::string> unique(names.begin(), names.end());
  EXPECT_EQ(unique.size(), names.size());
  for (const char* required : {"llama3-8b", "llama3-70b", "mixtral-8x7b"}) {
    EXPECT_EQ(unique.count(required), 1u) << required;
  }
  for (const std::string& n : names) {
    const ModelSpec m = model_preset(n);
    EXPECT_EQ(m.name, n);
    const FlopsCoefficients c = training_flops_coefficients(m);
    EXPECT_GT(c.per_token, 0) << n;
    EXPECT_GT(c.per_token_squared, 0) << n;
    expect_rel_near(training_flops(m, 12345, 6789012), spec_training_flops(m, 12345, 6789012));
  }
}

TEST(FlopsPresets, UnknownNameListsTheKnownOnes) {
  expect_throw_with<InvalidArgument>([] { model_preset("llama4-8b"); },
                                     {"llama4-8b", "llama3-8b", "llama3-70b", "mixtral-8x7b"});
  const std::string message = expect_throw_with<InvalidArgument>([] { model_preset(""); }, {});
  for (const std::string& n : model_preset_names()) {
    EXPECT_NE(message.find(n), std::string::npos) << message;
  }
}

// ---------------------------------------------------------------------------------------------
// The formula

TEST(FlopsFormula, Llama3_8bCoefficientsByHand) {
  // Per layer and token: QKV 2·4096·(4096+2·1024) + out 2·4096·4096 + MLP 2·4096·14336·3
  // = 50,331,648 + 33,554,432 + 352,321,536 = 436,207,616; ×32 layers + logits 2·4096·128256.
  const FlopsCoefficients c = training_flops_coefficients(llama3_8b_by_hand());
  EXPECT_EQ(c.per_token, 3.0 * (32.0 * 436'207'616.0 + 1'050'673'152.0));
  EXPECT_EQ(c.per_token, 45'027'950'592.0);
  // Attention: 32 layers · 2·q, q = 4096.
  EXPECT_EQ(c.per_token_squared, 3.0 * 32.0 * 2.0 * 4096.0);
}

TEST(FlopsFormula, Llama3_8bMatchesSpecForSeveralBatches) {
  const ModelSpec m = llama3_8b_by_hand();
  struct Case {
    double s1, s2;
  };
  const std::vector<Case> cases = {
      {1, 1}, {4096, 4096.0 * 4096}, {8192 + 100, 8192.0 * 8192 + 100.0 * 100}, {2'000'000, 2.0e10},
      {0, 0},
  };
  for (const Case& c : cases) {
    expect_rel_near(training_flops(m, c.s1, c.s2), spec_training_flops(m, c.s1, c.s2));
  }
  EXPECT_EQ(training_flops(m, 0, 0), 0.0);
  // One 8192-token sequence is about 3.9e14 FLOPs: ~4.5e10·8192 + 7.9e5·8192².
  expect_rel_near(training_flops(m, 8192, 8192.0 * 8192),
                  45'027'950'592.0L * 8192 + 786'432.0L * 8192 * 8192);
}

TEST(FlopsFormula, LinearInS1AndS2) {
  const ModelSpec m = model_preset("llama3-70b");
  const double a = training_flops(m, 1000, 3e5), b = training_flops(m, 2500, 4e6);
  expect_rel_near(training_flops(m, 3500, 4.3e6), static_cast<long double>(a) + b);
  const FlopsCoefficients c = training_flops_coefficients(m);
  EXPECT_DOUBLE_EQ(training_flops(m, 7, 0), 7 * c.per_token);
  EXPECT_DOUBLE_EQ(training_flops(m, 0, 11), 11 * c.per_token_squared);
}

TEST(FlopsFormula, PackingShortSequencesCostsLessAttentionThanOneLongOne) {
  // Same S1, smaller S2: 8 sequences of 1024 vs one of 8192.
  const ModelSpec m = llama3_8b_by_hand();
  const double packed = training_flops(m, 8192, 8 * 1024.0 * 1024);
  const double single = training_flops(m, 8192, 8192.0 * 8192);
  EXPECT_LT(packed, single);
  expect_rel_near(single - packed, 3.0L * 32 * 2 * 4096 * (8192.0L * 8192 - 8 * 1024.0L * 1024),
                  1e-9);
}

TEST(FlopsFormula, MoeTopKScalesOnlyTheMlpTerm) {
  ModelSpec dense = model_preset("mixtral-8x7b");
  dense.moe_topk = 1;
  for (int64_t k : {1, 2, 4, 8}) {
    ModelSpec moe = dense;
    moe.moe_topk = k;
    const FlopsCoefficients cd = training_flops_coefficients(dense);
    const FlopsCoefficients cm = training_flops_coefficients(moe);
    // Extra MLP per token: 3 · layers · 2·h·f·g·(k-1).
    EXPECT_DOUBLE_EQ(cm.per_token - cd.per_token,
                     3.0 * 32 * 2 * 4096.0 * 14336 * 3 * static_cast<double>(k - 1))
        << "k " << k;
    EXPECT_DOUBLE_EQ(cm.per_token_squared, cd.per_token_squared);
    expect_rel_near(training_flops(moe, 5000, 1.2e7), spec_training_flops(moe, 5000, 1.2e7));
  }
}

TEST(FlopsFormula, SwigluFactor) {
  ModelSpec gelu = llama3_8b_by_hand();
  gelu.swiglu = false;
  const FlopsCoefficients cg = training_flops_coefficients(gelu);
  const FlopsCoefficients cs = training_flops_coefficients(llama3_8b_by_hand());
  // g = 3 vs 2: one h·f matmul less per layer.
  EXPECT_DOUBLE_EQ(cs.per_token - cg.per_token, 3.0 * 32 * 2 * 4096.0 * 14336);
  expect_rel_near(training_flops(gelu, 321, 54321), spec_training_flops(gelu, 321, 54321));
}

TEST(FlopsFormula, GroupedQueryAttentionUsesKvHeads) {
  ModelSpec mha = llama3_8b_by_hand();
  mha.kv_heads = 32;
  const double diff = training_flops_coefficients(mha).per_token -
                      training_flops_coefficients(llama3_8b_by_hand()).per_token;
  // QKV: 2·h·2·(kv_mha - kv_gqa) per layer, ×3 for training.
  EXPECT_DOUBLE_EQ(diff, 3.0 * 32 * 2 * 4096.0 * 2 * (4096 - 1024));
  // Head dim that differs from hidden/heads changes q.
  ModelSpec wide = llama3_8b_by_hand();
  wide.head_dim = 256;
  expect_rel_near(training_flops(wide, 100, 10000), spec_training_flops(wide, 100, 10000));
}

TEST(FlopsFormula, RejectsNonPositiveSizes) {
  const std::vector<std::pair<const char*, int64_t ModelSpec::*>> fields = {
      {"hidden", &ModelSpec::hidden},     {"layers", &ModelSpec::layers},
      {"heads", &ModelSpec::heads},       {"kv_heads", &ModelSpec::kv_heads},
      {"head_dim", &ModelSpec::head_dim}, {"ffn", &ModelSpec::ffn},
      {"vocab", &ModelSpec::vocab},       {"moe_topk", &ModelSpec::moe_topk},
  };
  for (const auto& [name, member] : fields) {
    for (int64_t bad : {0, -1}) {
      ModelSpec m = llama3_8b_by_hand();
      m.*member = bad;
      SCOPED_TRACE(std::string(name) + "=" + std::to_string(bad));
      expect_throw_with<InvalidArgument>([&] { training_flops_coefficients(m); },
                                         {"llama3-8b", name, "> 0"});
      expect_throw_with<InvalidArgument>([&] { training_flops(m, 1, 1); }, {name});
      expect_throw_with<InvalidArgument>([&] { CostModel::from_model(m); }, {name});
    }
  }
}

TEST(FlopsLengthSums, AddsRealAndPadded) {
  LengthSums s;
  s.add(5, 8);
  s.add(3, 4);
  s.add(100000, 100000);
  EXPECT_DOUBLE_EQ(s.s1_real, 100008);
  EXPECT_DOUBLE_EQ(s.s2_real, 25 + 9 + 1e10);
  EXPECT_DOUBLE_EQ(s.s1_padded, 100012);
  EXPECT_DOUBLE_EQ(s.s2_padded, 64 + 16 + 1e10);
}

// ---------------------------------------------------------------------------------------------
// CostModel

TEST(CostModel, FromModelEqualsTrainingFlopsOfOneSample) {
  for (const std::string& n : model_preset_names()) {
    const ModelSpec m = model_preset(n);
    const CostModel cm = CostModel::from_model(m);
    for (int64_t len : {1, 2, 17, 4096, 8192, 65536, 1'000'000}) {
      const double l = static_cast<double>(len);
      EXPECT_DOUBLE_EQ(cm.cost(len), training_flops(m, l, l * l)) << n << " L=" << len;
    }
  }
  const CostModel c8 = CostModel::from_model(llama3_8b_by_hand());
  EXPECT_EQ(c8.linear, 45'027'950'592.0);
  EXPECT_EQ(c8.quadratic, 786'432.0);
}

TEST(CostModel, CostIsLinearPlusQuadratic) {
  const CostModel c = CostModel::from_coefficients(3, 0.5);
  EXPECT_DOUBLE_EQ(c.cost(0), 0);
  EXPECT_DOUBLE_EQ(c.cost(1), 3.5);
  EXPECT_DOUBLE_EQ(c.cost(10), 80);
  EXPECT_DOUBLE_EQ(c.cost(1'000'000), 3e6 + 5e11);
  const CostModel dflt;
  EXPECT_DOUBLE_EQ(dflt.cost(1234), 1234);  // default: cost = tokens
}

TEST(CostModel, CostIsNonDecreasingInLength) {
  const CostModel c = CostModel::from_model(model_preset("mixtral-8x7b"));
  double previous = 0;
  for (int64_t len = 1; len <= 200'000; len += 997) {
    const double now = c.cost(len);
    EXPECT_GT(now, previous) << "L=" << len;
    previous = now;
  }
}

TEST(CostModel, FromCoefficientsAcceptsNonNegative) {
  EXPECT_DOUBLE_EQ(CostModel::from_coefficients(1, 0).cost(7), 7);
  EXPECT_DOUBLE_EQ(CostModel::from_coefficients(0, 1).cost(7), 49);
  const CostModel c = CostModel::from_coefficients(2.5, 1e-3);
  EXPECT_DOUBLE_EQ(c.linear, 2.5);
  EXPECT_DOUBLE_EQ(c.quadratic, 1e-3);
}

TEST(CostModel, FromCoefficientsRejectsBadValues) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  expect_throw_with<InvalidArgument>([] { CostModel::from_coefficients(0, 0); }, {"not both 0"});
  expect_throw_with<InvalidArgument>([] { CostModel::from_coefficients(-1, 1); }, {"linear=-1"});
  expect_throw_with<InvalidArgument>([] { CostModel::from_coefficients(1, -0.5); },
                                     {"quadratic=-0.5"});
  expect_throw_with<InvalidArgument>([&] { CostModel::from_coefficients(nan, 1); }, {"finite"});
  expect_throw_with<InvalidArgument>([&] { CostModel::from_coefficients(1, inf); }, {"finite"});
}

}  // namespace
}  // namespace thdpack
