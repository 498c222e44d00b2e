#include "moe_case.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "expect_throw.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/pipeline/moe_dispatch.hpp"

namespace thdpack::testing {
namespace {

constexpr int64_t kHidden = 6;
constexpr int kTopK = 2;

struct Routing {
  int64_t tokens = 0;
  std::vector<float> hidden;
  std::vector<int64_t> topk;
  std::vector<float> weights;
};

// This rank's tokens: counts vary by rank (some ranks have none), experts distinct per token or -1.
Routing random_routing(int rank, int experts, uint64_t seed) {
  std::mt19937_64 rng(seed * 1000003 + static_cast<uint64_t>(rank));
  Routing r;
  r.tokens = rank % 3 == 2 ? 0 : static_cast<int64_t>(rng() % 40);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (int64_t t = 0; t < r.tokens * kHidden; ++t) r.hidden.push_back(value(rng));
  for (int64_t t = 0; t < r.tokens; ++t) {
    const int64_t a = static_cast<int64_t>(rng() % static_cast<uint64_t>(experts));
    int64_t b = static_cast<int64_t>(rng() % static_cast<uint64_t>(experts));
    if (b == a) b = -1;
    if (rng() % 7 == 0) b = -1;
    r.topk.insert(r.topk.end(), {a, b});
    r.weights.insert(r.weights.end(), {value(rng), b >= 0 ? value(rng) : 0.0f});
  }
  return r;
}

// Expert e's weight matrix, the same on every rank.
float weight(int64_t e, int64_t row, int64_t col) {
  return static_cast<float>(std::sin(0.7 * static_cast<double>(e + 1) +
                                     0.3 * static_cast<double>(row) -
                                     0.11 * static_cast<double>(col)));
}

std::vector<float> apply_experts(const DispatchResult& d, int rank, int experts_per_rank) {
  const int64_t rows = d.num_rows();
  std::vector<float> out(static_cast<size_t>(rows * kHidden), 0.0f);
  for (int64_t i = 0; i < rows; ++i) {
    for (int j = 0; j < kTopK; ++j) {
      const int64_t local = d.topk_idx[static_cast<size_t>(i * kTopK + j)];
      if (local < 0) continue;
      const int64_t e = static_cast<int64_t>(rank) * experts_per_rank + local;
      const float w = d.topk_weights[static_cast<size_t>(i * kTopK + j)];
      for (int64_t o = 0; o < kHidden; ++o) {
        float acc = 0;
        for (int64_t c = 0; c < kHidden; ++c)
          acc += weight(e, o, c) * d.hidden[static_cast<size_t>(i * kHidden + c)];
        out[static_cast<size_t>(i * kHidden + o)] += w * acc;
      }
    }
  }
  return out;
}

double dot(std::span<const float> a, std::span<const float> b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return s;
}

double global_sum(Communicator& ep, double v) {
  std::vector<double> x = {v};
  ep.allreduce(x, ReduceOp::kSum);
  return x[0];
}

}  // namespace

void check_moe_dispatch(Communicator& ep, uint64_t seed) {
  const int ranks = ep.size();
  const int experts = 2 * ranks;
  const Routing r = random_routing(ep.rank(), experts, seed);
  DispatchOptions options;
  options.num_experts = experts;
  options.expert_alignment = 4;

  const DispatchResult d =
      dispatch(ep, r.hidden, r.topk, r.weights, r.tokens, kHidden, kTopK, options);
  // Identity experts: each token comes back times the number of ranks it visited.
  const std::vector<float> identity = combine(ep, d.hidden, d.handle);
  ASSERT_EQ(identity.size(), r.hidden.size());
  const RoutingLayout layout = routing_layout(r.topk, r.tokens, kTopK, experts, ranks);
  for (int64_t t = 0; t < r.tokens; ++t) {
    int visits = 0;
    for (int q = 0; q < ranks; ++q)
      visits += layout.token_in_rank[static_cast<size_t>(t * ranks + q)];
    for (int64_t c = 0; c < kHidden; ++c) {
      const float x = r.hidden[static_cast<size_t>(t * kHidden + c)];
      EXPECT_NEAR(identity[static_cast<size_t>(t * kHidden + c)], x * static_cast<float>(visits),
                  1e-6f);
    }
  }
  int64_t pairs = 0;
  for (int64_t c : d.tokens_per_expert) pairs += c;
  for (size_t e = 0; e < d.tokens_per_expert.size(); ++e) {
    EXPECT_EQ(d.aligned_tokens_per_expert[e] % 4, 0);
    EXPECT_GE(d.aligned_tokens_per_expert[e], d.tokens_per_expert[e]);
  }
  // Every (token, expert) pair arrives exactly once across the EP group.
  int64_t sent_pairs = 0;
  for (int64_t v : r.topk) sent_pairs += v >= 0;
  EXPECT_EQ(global_sum(ep, static_cast<double>(pairs)),
            global_sum(ep, static_cast<double>(sent_pairs)));

  // Linear experts with gate weights applied in the expert equal the dense computation.
  const std::vector<float> y = combine(ep, apply_experts(d, ep.rank(), experts / ranks), d.handle);
  for (int64_t t = 0; t < r.tokens; ++t) {
    for (int64_t o = 0; o < kHidden; ++o) {
      double want = 0;
      for (int j = 0; j < kTopK; ++j) {
        const int64_t e = r.topk[static_cast<size_t>(t * kTopK + j)];
        if (e < 0) continue;
        double acc = 0;
        for (int64_t c = 0; c < kHidden; ++c)
          acc += weight(e, o, c) * r.hidden[static_cast<size_t>(t * kHidden + c)];
        want += r.weights[static_cast<size_t>(t * kTopK + j)] * acc;
      }
      EXPECT_NEAR(y[static_cast<size_t>(t * kHidden + o)], want, 1e-4);
    }
  }

  // Padded mode (HybridEP): identical results.
  DispatchOptions padded = options;
  padded.padded = true;
  padded.pad_alignment = 64;
  const DispatchResult p =
      dispatch(ep, r.hidden, r.topk, r.weights, r.tokens, kHidden, kTopK, padded);
  EXPECT_EQ(p.hidden, d.hidden);
  EXPECT_EQ(p.topk_idx, d.topk_idx);
  EXPECT_EQ(p.topk_weights, d.topk_weights);
  EXPECT_EQ(p.handle.padded_tokens % 64, 0);
  EXPECT_GE(p.handle.padded_tokens, r.tokens);
  EXPECT_EQ(combine(ep, apply_experts(p, ep.rank(), experts / ranks), p.handle), y);

  // Backward passes are the adjoints: <dispatch(x), g> = <x, dispatch_backward(g)>, and
  // <combine(z), u> = <z, combine_backward(u)>, summed over the EP group.
  std::mt19937_64 rng(seed + 17 + static_cast<uint64_t>(ep.rank()));
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> g(d.hidden.size()), u(r.hidden.size());
  for (float& v : g) v = value(rng);
  for (float& v : u) v = value(rng);
  const double lhs1 = global_sum(ep, dot(d.hidden, g));
  const double rhs1 = global_sum(ep, dot(r.hidden, dispatch_backward(ep, g, d.handle)));
  EXPECT_NEAR(lhs1, rhs1, 1e-4 * (1 + std::abs(lhs1)));
  const double lhs2 = global_sum(ep, dot(combine(ep, g, d.handle), u));
  const double rhs2 = global_sum(ep, dot(g, combine_backward(ep, u, d.handle)));
  EXPECT_NEAR(lhs2, rhs2, 1e-4 * (1 + std::abs(lhs2)));
  // The dispatched gate weights: their gradient, masked to the local experts, combined as k
  // columns, is the adjoint of dispatching the weights.
  std::vector<float> gw(d.topk_weights.size());
  for (size_t i = 0; i < gw.size(); ++i) gw[i] = d.topk_idx[i] >= 0 ? value(rng) : 0.0f;
  const double lhs3 = global_sum(ep, dot(d.topk_weights, gw));
  const double rhs3 = global_sum(ep, dot(r.weights, combine_values(ep, gw, kTopK, d.handle)));
  EXPECT_NEAR(lhs3, rhs3, 1e-4 * (1 + std::abs(lhs3)));
}

void check_moe_validation(Communicator& ep) {
  const int experts = 2 * ep.size();
  const Routing r = random_routing(ep.rank(), experts, 5);
  DispatchOptions options;
  options.num_experts = experts;
  auto expect_everywhere = [](auto&& call, const std::string& needle) {
    test_util::expect_throw_with<InvalidArgument>(call, needle);
  };

  // An expert id out of range on the last rank.
  std::vector<int64_t> bad = r.topk;
  if (ep.rank() == ep.size() - 1)
    bad.assign(bad.size(), 0), bad.push_back(experts), bad.push_back(0);
  std::vector<float> hidden = r.hidden, weights = r.weights;
  int64_t tokens = r.tokens;
  if (ep.rank() == ep.size() - 1) {
    tokens += 1;
    hidden.resize(static_cast<size_t>(tokens * kHidden), 0.5f);
    weights.resize(static_cast<size_t>(tokens * kTopK), 0.5f);
  }
  expect_everywhere([&] { dispatch(ep, hidden, bad, weights, tokens, kHidden, kTopK, options); },
                    "EP rank " + std::to_string(ep.size() - 1));
  // Ranks disagreeing on k.
  if (ep.size() > 1) {
    const int k = ep.rank() == 0 ? 1 : kTopK;
    std::vector<int64_t> topk(static_cast<size_t>(r.tokens * k), 0);
    std::vector<float> w(static_cast<size_t>(r.tokens * k), 1.0f);
    expect_everywhere([&] { dispatch(ep, r.hidden, topk, w, r.tokens, kHidden, k, options); },
                      "disagree on the k");
    // Ranks disagreeing on the hidden size.
    const int64_t h = ep.rank() == 0 ? kHidden + 1 : kHidden;
    std::vector<float> x(static_cast<size_t>(r.tokens * h), 0.0f);
    expect_everywhere([&] { dispatch(ep, x, r.topk, r.weights, r.tokens, h, kTopK, options); },
                      "disagree on the hidden size");
  }
}

}  // namespace thdpack::testing
