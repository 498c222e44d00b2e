// Pipeline cost per step (BENCHMARKS.md figure 8), under mpirun: bytes moved per rank against the
// minimum, collectives per step, and the time to prepare a step per 1M tokens, for thdpack's
// pipeline and for a Megatron-style flow (megatron_flow.hpp) measured in the same run on the same
// plans.
//
//   mpirun -np 16 thdpack_pipeline_bench --tp 2 --cp 2 --pp 2 --dp 2 [--workload sft-8k]
//          [--steps 10] [--out pipeline.json]

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "megatron_flow.hpp"
#include "thdpack/comm/mpi_communicator.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/data/workloads.hpp"

namespace thdpack::bench {
namespace {

struct Args {
  int tp = 1, cp = 1, pp = 1, dp = 8;
  std::string workload = "sft-8k";
  int64_t steps = 10;
  int64_t warmup = 2;
  std::string out;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--tp")
      a.tp = std::stoi(v);
    else if (k == "--cp")
      a.cp = std::stoi(v);
    else if (k == "--pp")
      a.pp = std::stoi(v);
    else if (k == "--dp")
      a.dp = std::stoi(v);
    else if (k == "--workload")
      a.workload = v;
    else if (k == "--steps")
      a.steps = std::stoll(v);
    else if (k == "--out")
      a.out = v;
    else
      throw InvalidArgument("unknown argument " + k);
  }
  return a;
}

struct Totals {
  std::vector<double> seconds;  // max over ranks, per measured step
  int64_t bytes_sum = 0;        // all ranks, all measured steps
  int64_t bytes_max = 0;        // one rank, one step
  int64_t exchange_sum = 0;
  int64_t collectives_max = 0;

  void add(Communicator& world, int64_t bytes, int64_t exchange, int64_t collectives,
           double seconds_here) {
    std::vector<int64_t> s = {bytes, exchange};
    world.allreduce(s, ReduceOp::kSum);
    std::vector<double> m = {static_cast<double>(bytes), static_cast<double>(collectives),
                             seconds_here};
    world.allreduce(m, ReduceOp::kMax);
    bytes_sum += s[0];
    exchange_sum += s[1];
    bytes_max = std::max(bytes_max, static_cast<int64_t>(m[0]));
    collectives_max = std::max(collectives_max, static_cast<int64_t>(m[1]));
    seconds.push_back(m[2]);
  }
  double median_seconds() const {
    auto v = seconds;
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
  }
};

int run(int argc, char** argv) {
  const Args a = parse(argc, argv);
  MpiCommunicator world(MPI_COMM_WORLD, MpiOptions{.timeout_seconds = 300});
  const Workload w = workload(a.workload);
  PipelineOptions o;
  o.topology = Topology({.tp = a.tp, .cp = a.cp, .dp = a.dp, .pp = a.pp});
  o.max_seqlen_per_dp_cp_rank = w.max_seqlen_per_dp_cp_rank;
  o.cost = CostModel::from_model(model_preset("llama3-8b"));
  const auto dataset = make_mock_dataset(w.dataset);
  const int64_t global_batch = default_global_batch(w, a.dp);
  Pipeline pipeline(world, o);
  ProcessGroups groups = make_process_groups(world, o.topology);

  Totals ours, theirs;
  double tokens = 0;
  int64_t minimum = 0;
  for (int64_t step = 0; step < a.warmup + a.steps; ++step) {
    std::vector<Sample> local;
    if (pipeline.reads_data()) {
      const auto ids = global_batch_indices(step, global_batch, dataset->size());
      const int64_t per = global_batch / a.dp, d = pipeline.coordinates().dp;
      for (int64_t j = d * per; j < (d + 1) * per; ++j)
        local.push_back(dataset->sample(ids[static_cast<size_t>(j)]));
    }
    world.barrier();
    const StepResult r = pipeline.run_step(local);
    world.barrier();
    const FlowStep m = megatron_style_step(world, groups, o, local);
    if (step < a.warmup) continue;
    ours.add(world, r.traffic.bytes_sent, r.traffic.exchange_bytes, r.traffic.collectives,
             r.traffic.seconds);
    theirs.add(world, m.bytes_sent, m.exchange_bytes, m.collectives, m.seconds);
    tokens += r.sums.s1_real;
    minimum += minimum_exchange_bytes(r, o);
  }
  if (world.rank() == 0) {
    const double steps = static_cast<double>(a.steps);
    nlohmann::json j = {
        {"ranks", world.size()},
        {"layout", o.topology.describe()},
        {"workload", a.workload},
        {"steps", a.steps},
        {"tokens_per_step", tokens / steps},
        {"ours",
         {{"exchange_vs_minimum",
           static_cast<double>(ours.exchange_sum) / static_cast<double>(minimum)},
          {"bytes_per_rank_mean", static_cast<double>(ours.bytes_sum) / steps / world.size()},
          {"bytes_per_rank_max", ours.bytes_max},
          {"collectives_per_step", ours.collectives_max},
          {"seconds_per_step_median", ours.median_seconds()},
          {"seconds_per_million_tokens", ours.median_seconds() / (tokens / steps) * 1e6}}},
        {"megatron_style",
         {{"exchange_vs_minimum",
           static_cast<double>(theirs.exchange_sum) / static_cast<double>(minimum)},
          {"bytes_per_rank_mean", static_cast<double>(theirs.bytes_sum) / steps / world.size()},
          {"bytes_per_rank_max", theirs.bytes_max},
          {"collectives_per_step", theirs.collectives_max},
          {"seconds_per_step_median", theirs.median_seconds()},
          {"seconds_per_million_tokens", theirs.median_seconds() / (tokens / steps) * 1e6}}},
    };
    std::printf("%s\n", j.dump(2).c_str());
    if (!a.out.empty()) std::ofstream(a.out) << j.dump(2) << '\n';
  }
  return 0;
}

}  // namespace
}  // namespace thdpack::bench

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int code = 0;
  try {
    code = thdpack::bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "thdpack_pipeline_bench: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return code;
}
