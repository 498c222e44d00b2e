// MoE dispatch and combine under mpirun (BENCHMARKS.md figure 10): bytes per dispatched token
// against the minimum (its hidden state, once per rank it visits, nothing for its own rank),
// padded mode's extra rows, and dispatch + combine time per 1M (token, expert) pairs.
// Token counts differ per rank, as with THD micro-batches.
//
//   mpirun -np 8 thdpack_moe_bench [--tokens 32768] [--hidden 512] [--experts 64] [--topk 4]
//                                  [--reps 10] [--out moe.json]

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "thdpack/comm/mpi_communicator.hpp"
#include "thdpack/pipeline/moe_dispatch.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int64_t tokens = 32768;  // mean per rank
  int64_t hidden = 512;
  int experts = 64;
  int topk = 4;
  int reps = 10;
  std::string out;
};

struct Measured {
  double median_seconds = 0;   ///< dispatch + combine, slowest rank
  int64_t dispatch_bytes = 0;  ///< sent by this rank
  int64_t combine_bytes = 0;
  int64_t padded_tokens = 0;
  std::vector<int64_t> send_rows;
};

/// One warm-up and `reps` timed dispatch + combine round trips.
Measured measure(thdpack::MpiCommunicator& ep, const Args& a, const std::vector<float>& hidden,
                 const std::vector<int64_t>& topk, const std::vector<float>& weights,
                 int64_t tokens, const thdpack::DispatchOptions& options) {
  Measured m;
  std::vector<double> times;
  for (int rep = 0; rep < a.reps + 1; ++rep) {
    ep.barrier();
    const auto before = ep.stats();
    const auto start = Clock::now();
    const thdpack::DispatchResult d =
        thdpack::dispatch(ep, hidden, topk, weights, tokens, a.hidden, a.topk, options);
    const auto middle = ep.stats();
    const std::vector<float> out = thdpack::combine(ep, d.hidden, d.handle);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const auto after = ep.stats();
    std::vector<double> slowest = {seconds};
    ep.allreduce(slowest, thdpack::ReduceOp::kMax);
    if (rep == 0) continue;  // warm-up
    times.push_back(slowest[0]);
    m.dispatch_bytes = middle.bytes_sent - before.bytes_sent;
    m.combine_bytes = after.bytes_sent - middle.bytes_sent;
    m.padded_tokens = d.handle.padded_tokens;
    m.send_rows = d.handle.send_rows;
  }
  std::sort(times.begin(), times.end());
  m.median_seconds = times[times.size() / 2];
  return m;
}

/// The transport floor measured the same way: one alltoallv of the same hidden-state bytes per
/// destination, there and back, already laid out (no routing, no packing, no checks).
double raw_alltoallv_seconds(thdpack::MpiCommunicator& ep, const Args& a,
                             const std::vector<int64_t>& send_rows) {
  const int64_t row = a.hidden * 4;
  std::vector<int64_t> send_counts(send_rows);
  for (int64_t& c : send_counts) c *= row;
  std::vector<int64_t> recv_counts(send_counts.size());
  ep.alltoallv(std::as_bytes(std::span(send_counts)), std::vector<int64_t>(send_counts.size(), 8),
               std::as_writable_bytes(std::span(recv_counts)),
               std::vector<int64_t>(send_counts.size(), 8));
  int64_t send_total = 0, recv_total = 0;
  for (size_t r = 0; r < send_counts.size(); ++r) {
    send_total += send_counts[r];
    recv_total += recv_counts[r];
  }
  std::vector<std::byte> out(static_cast<size_t>(send_total), std::byte{1});
  std::vector<std::byte> in(static_cast<size_t>(recv_total));
  std::vector<double> times;
  for (int rep = 0; rep < a.reps + 1; ++rep) {
    ep.barrier();
    const auto start = Clock::now();
    ep.alltoallv(out, send_counts, in, recv_counts);
    ep.alltoallv(in, recv_counts, out, send_counts);
    std::vector<double> slowest = {std::chrono::duration<double>(Clock::now() - start).count()};
    ep.allreduce(slowest, thdpack::ReduceOp::kMax);
    if (rep > 0) times.push_back(slowest[0]);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

int run(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--tokens")
      a.tokens = std::stoll(v);
    else if (k == "--hidden")
      a.hidden = std::stoll(v);
    else if (k == "--experts")
      a.experts = std::stoi(v);
    else if (k == "--topk")
      a.topk = std::stoi(v);
    else if (k == "--reps")
      a.reps = std::stoi(v);
    else if (k == "--out")
      a.out = v;
    else
      throw std::runtime_error("unknown argument " + k);
  }
  thdpack::MpiCommunicator ep(MPI_COMM_WORLD);
  const int ranks = ep.size();
  std::mt19937_64 rng(static_cast<uint64_t>(ep.rank()) + 11);
  // THD micro-batches: every rank holds a different number of tokens (0.5x to 1.5x the mean).
  const auto tokens = static_cast<int64_t>(static_cast<double>(a.tokens) *
                                           (0.5 + static_cast<double>(rng() % 1001) / 1000.0));
  std::vector<float> hidden(static_cast<size_t>(tokens * a.hidden), 0.25f);
  std::vector<int64_t> topk(static_cast<size_t>(tokens * a.topk));
  std::vector<float> weights(topk.size(), 1.0f / static_cast<float>(a.topk));
  for (int64_t t = 0; t < tokens; ++t) {
    // k distinct experts per token
    std::vector<int64_t> chosen;
    while (static_cast<int>(chosen.size()) < a.topk) {
      const auto e = static_cast<int64_t>(rng() % static_cast<uint64_t>(a.experts));
      if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
    }
    std::copy(chosen.begin(), chosen.end(), topk.begin() + t * a.topk);
  }
  thdpack::DispatchOptions options;
  options.num_experts = a.experts;
  const Measured plain = measure(ep, a, hidden, topk, weights, tokens, options);
  options.padded = true;
  const Measured padded = measure(ep, a, hidden, topk, weights, tokens, options);

  const double raw_seconds = raw_alltoallv_seconds(ep, a, plain.send_rows);

  int64_t crossing_rows = 0;
  for (int r = 0; r < ranks; ++r) {
    if (r != ep.rank()) crossing_rows += plain.send_rows[static_cast<size_t>(r)];
  }
  int64_t pairs = 0;
  for (int64_t e : topk) pairs += e >= 0;
  std::vector<int64_t> sums = {
      plain.dispatch_bytes,          plain.combine_bytes,  crossing_rows, pairs,
      padded.padded_tokens - tokens, padded.dispatch_bytes};
  ep.allreduce(sums, thdpack::ReduceOp::kSum);
  std::vector<int64_t> maxima = {tokens, padded.padded_tokens - tokens};
  ep.allreduce(maxima, thdpack::ReduceOp::kMax);
  if (ep.rank() == 0) {
    // The minimum: each token's hidden state once per other rank it visits.
    const double minimum = static_cast<double>(sums[2]) * static_cast<double>(a.hidden) * 4;
    const double million_pairs = static_cast<double>(sums[3]) / 1e6;
    nlohmann::json j = {
        {"ranks", ranks},
        {"tokens_per_rank_mean", a.tokens},
        {"hidden", a.hidden},
        {"experts", a.experts},
        {"topk", a.topk},
        {"token_expert_pairs", sums[3]},
        {"dispatch_bytes_vs_minimum", static_cast<double>(sums[0]) / minimum},
        {"combine_bytes_vs_minimum", static_cast<double>(sums[1]) / minimum},
        {"padded_dispatch_bytes_vs_minimum", static_cast<double>(sums[5]) / minimum},
        {"padded_extra_rows_mean", static_cast<double>(sums[4]) / ranks},
        {"padded_extra_rows_max", maxima[1]},
        {"padded_rows_over_max_tokens", padded.padded_tokens - maxima[0]},
        {"dispatch_combine_seconds_median", plain.median_seconds},
        {"seconds_per_million_pairs", plain.median_seconds / million_pairs},
        {"padded_seconds_per_million_pairs", padded.median_seconds / million_pairs},
        {"raw_alltoallv_seconds_per_million_pairs", raw_seconds / million_pairs},
        {"vs_raw_alltoallv", plain.median_seconds / raw_seconds},
    };
    std::printf("%s\n", j.dump(2).c_str());
    if (!a.out.empty()) std::ofstream(a.out) << j.dump(2) << '\n';
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int code = 0;
  try {
    code = run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "thdpack_moe_bench: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return code;
}
