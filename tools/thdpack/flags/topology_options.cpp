#include "flags/topology_options.hpp"

#include <cstdint>
#include <limits>

#include "flags/flag_values.hpp"

namespace thdpack::cli {
namespace {

// Largest size of one parallel dimension a flag takes (a size is an int).
constexpr int64_t kMaxSize = std::numeric_limits<int>::max();

}  // namespace

void TopologyFlags::add_to(CLI::App& command) {
  command.add_option("--tp,--tensor-model-parallel-size", tp, "tensor-parallel size")
      ->check(positive_integer(kMaxSize))
      ->capture_default_str();
  command
      .add_option("--cp,--context-parallel-size", cp,
                  "context-parallel size (default: the workload's, else 1)")
      ->check(positive_integer(kMaxSize));
  command.add_option("--dp", dp, "data-parallel size")
      ->check(positive_integer(kMaxSize))
      ->capture_default_str();
  command.add_option("--pp,--pipeline-model-parallel-size", pp, "pipeline-parallel size")
      ->check(positive_integer(kMaxSize))
      ->capture_default_str();
  command
      .add_option("--ep,--expert-model-parallel-size", ep, "expert-parallel size (divides dp*cp)")
      ->check(positive_integer(kMaxSize))
      ->capture_default_str();
  command
      .add_option("--vpp,--num-virtual-stages-per-pipeline-rank", vpp,
                  "virtual pipeline stages per PP rank")
      ->check(positive_integer(kMaxSize))
      ->capture_default_str();
  command
      .add_option("--vpp-group,--microbatch-group-size-per-virtual-pipeline-stage", vpp_group,
                  "micro-batch group size per virtual stage (0 = pp); with --vpp > 1 the "
                  "micro-batch count is a multiple of it")
      ->check(non_negative_integer(kMaxSize))
      ->capture_default_str();
  command.add_option("--order", order, "rank order, fastest first")
      ->check(non_empty())
      ->capture_default_str();
  command.add_flag("--sequence-parallel", sequence_parallel,
                   "sequence parallelism: the padding divisor is multiplied by tp");
}

Topology TopologyFlags::resolve(int default_cp) const {
  TopologyConfig c;
  c.tp = tp;
  c.cp = cp.value_or(default_cp);
  c.dp = dp;
  c.pp = pp;
  c.ep = ep;
  c.vpp = vpp;
  c.vpp_group = vpp_group;
  c.order = order;
  return Topology(c);
}

}  // namespace thdpack::cli
