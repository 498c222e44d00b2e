#include "thdpack/comm/process_groups.hpp"

#include <algorithm>

namespace thdpack {

std::unique_ptr<Communicator> make_group(Communicator& world, const Topology& topology,
                                         GroupKind kind) {
  topology.check_world_size(world.size());
  const auto members = topology.group_ranks(kind, world.rank());
  // The smallest member names the group; the position in group order is the key.
  const int color = *std::min_element(members.begin(), members.end());
  const int key = topology.group_rank(kind, world.rank());
  return world.split(color, key);
}

ProcessGroups make_process_groups(Communicator& world, const Topology& topology) {
  ProcessGroups g;
  g.tp = make_group(world, topology, GroupKind::kTp);
  g.cp = make_group(world, topology, GroupKind::kCp);
  g.dp = make_group(world, topology, GroupKind::kDp);
  g.pp = make_group(world, topology, GroupKind::kPp);
  g.dp_cp = make_group(world, topology, GroupKind::kDpCp);
  g.ep = make_group(world, topology, GroupKind::kEp);
  return g;
}

}  // namespace thdpack
