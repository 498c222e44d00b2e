#pragma once
// Reordering-exchange checks that run on any Communicator (local threads in unit tests, MPI ranks
// under mpirun), each rank comparing what it received with a single-process reference computed
// from the whole synthetic workload.

#include <cstdint>
#include <vector>

#include "thdpack/comm/communicator.hpp"
#include "thdpack/multimodal/reorder.hpp"

namespace thdpack::testing {

struct ReorderCase {
  int64_t microbatch_size = 12;  ///< B
  int64_t microbatches = 5;      ///< in total, split into windows of `window`
  int window = 2;
  uint64_t seed = 1;
  std::vector<int> module_dp_sizes;  ///< empty: the group's size
  AssignmentMethod method = AssignmentMethod::kRefined;
};

/// Runs every window synchronously and overlapped (one window ahead) over `group`; checks both
/// against the reference (positions, every field of every sample), that they are identical, that
/// each rank read only its shard, and the figures (moved samples and bytes, spreads).
void check_reorder_exchange(Communicator& group, const ReorderCase& c);

/// Samples of identical cost: nothing moves and no bytes travel.
void check_reorder_uniform_costs_move_nothing(Communicator& group);

/// A sample whose image count disagrees with its vision data on the last rank, and ranks
/// disagreeing on the window: InvalidArgument on every rank, naming the rank (no hang).
void check_reorder_errors(Communicator& group);

/// Two modules on one world (ranks [0, vision_dp) vision, the rest language): each reorders over
/// its own DP group with module sizes {vision_dp, language_dp}; vision rank r must end with exactly
/// the samples of the language ranks it serves. The world has vision_dp + language_dp ranks.
void check_reorder_heterogeneous_modules(Communicator& world, int vision_dp, int language_dp);

}  // namespace thdpack::testing
