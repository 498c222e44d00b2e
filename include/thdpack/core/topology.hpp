#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Parallel layout of a training job: tensor (tp), context (cp), data (dp), pipeline (pp),
// expert (ep) parallel sizes, virtual pipelining, and the order in which global ranks enumerate
// the coordinates.
//
// Rank order follows Megatron-LM: the order string lists dimensions from the fastest varying to
// the slowest, default "tp-cp-ep-dp-pp" (TP innermost). For the dense layout ep does not take part
// in the world decomposition (world = tp·cp·dp·pp); expert-parallel groups are carved out of the
// flattened dp×cp index (cp fastest) as Megatron does for expert layers: ep consecutive dp×cp
// positions with the same tp and pp coordinates form one EP group.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace thdpack {

/// The parallel dimensions a rank has a coordinate in.
enum class Dim { kTp = 0, kCp = 1, kDp = 2, kPp = 3 };

/// The process groups thdpack forms (each a set of global ranks, ordered by their group rank).
enum class GroupKind {
  kTp,    ///< same cp, dp, pp
  kCp,    ///< same tp, dp, pp
  kDp,    ///< same tp, cp, pp
  kPp,    ///< same tp, cp, dp
  kDpCp,  ///< same tp, pp: all ranks that hold different data of one step (dp×cp)
  kEp,    ///< ep consecutive dp×cp positions with the same tp, pp
};

/// Coordinates of one global rank.
struct Coordinates {
  int tp = 0;
  int cp = 0;
  int dp = 0;
  int pp = 0;
  bool operator==(const Coordinates&) const = default;
};

/// Sizes and order of a layout. All sizes >= 1.
struct TopologyConfig {
  int tp = 1;
  int cp = 1;
  int dp = 1;
  int pp = 1;
  int ep = 1;   ///< expert-parallel size; must divide dp·cp
  int vpp = 1;  ///< virtual pipeline stages per PP rank (1 = no interleaving)
  /// Megatron's microbatch_group_size_per_vp_stage: with vpp > 1 the number of micro-batches per
  /// step must be a multiple of it. 0 means "pp" (Megatron's default). Ignored when vpp == 1.
  int vpp_group = 0;
  std::string order = "tp-cp-ep-dp-pp";
};

/// An immutable, validated layout. Construction throws InvalidArgument on bad sizes or order.
class Topology {
 public:
  explicit Topology(const TopologyConfig& config = {});

  const TopologyConfig& config() const { return config_; }
  int tp() const { return config_.tp; }
  int cp() const { return config_.cp; }
  int dp() const { return config_.dp; }
  int pp() const { return config_.pp; }
  int ep() const { return config_.ep; }
  int vpp() const { return config_.vpp; }
  /// Number of global ranks: tp·cp·dp·pp.
  int world_size() const { return config_.tp * config_.cp * config_.dp * config_.pp; }
  /// Micro-batch count multiple required by the pipeline schedule: vpp_group (or pp) when vpp > 1,
  /// else 1.
  int microbatch_multiple() const;

  /// Throws InvalidArgument unless `world_size` (e.g. the number of MPI ranks) equals
  /// tp·cp·dp·pp; the message names both and the sizes.
  void check_world_size(int world_size) const;

  /// Coordinates of `rank` in [0, world_size); throws InvalidArgument when out of range.
  Coordinates coordinates(int rank) const;
  /// Global rank of the given coordinates; throws InvalidArgument when any is out of range.
  int rank_of(const Coordinates& c) const;

  /// Global ranks of the group of kind `kind` containing `rank`, in group-rank order.
  std::vector<int> group_ranks(GroupKind kind, int rank) const;
  /// This rank's index inside its group of kind `kind`.
  int group_rank(GroupKind kind, int rank) const;
  /// Every group of the given kind, each as in group_ranks; groups ordered by their smallest rank.
  std::vector<std::vector<int>> all_groups(GroupKind kind) const;

  /// "tp=2 cp=1 dp=4 pp=1 (order tp-cp-ep-dp-pp)".
  std::string describe() const;

 private:
  int size_of(Dim d) const;

  TopologyConfig config_;
  std::array<Dim, 4> order_{};      // fastest first
  std::array<int, 4> stride_of_{};  // indexed by Dim
};

}  // namespace thdpack
