#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// The communicators of a parallel layout, split from the world in Megatron's rank order.

#include <memory>

#include "thdpack/comm/communicator.hpp"
#include "thdpack/core/topology.hpp"

namespace thdpack {

/// This rank's groups. Group ranks follow Topology::group_ranks (e.g. the DP group's rank is the DP
/// coordinate; the dp_cp group is ordered cp fastest).
struct ProcessGroups {
  std::unique_ptr<Communicator> tp;
  std::unique_ptr<Communicator> cp;
  std::unique_ptr<Communicator> dp;
  std::unique_ptr<Communicator> pp;
  std::unique_ptr<Communicator> dp_cp;
  std::unique_ptr<Communicator> ep;
};

/// Splits `world` into every group kind (collective over world, six splits). Throws
/// InvalidArgument when world.size() != topology.world_size().
ProcessGroups make_process_groups(Communicator& world, const Topology& topology);

/// One group kind only (collective over world).
std::unique_ptr<Communicator> make_group(Communicator& world, const Topology& topology,
                                         GroupKind kind);

}  // namespace thdpack
