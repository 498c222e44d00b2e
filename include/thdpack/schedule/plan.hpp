#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// The plan of one global batch, one type for every scheduler (SPEC §5, §11 "Plans").
//
// A plan is a list of micro-batches; each micro-batch splits the G = dp·cp ranks of the dp×cp group
// into contiguous CP groups {first_rank, size, ids}: ranks [first_rank, first_rank + size) run the
// samples `ids`, in that order, with context parallelism over the group. Ranks are positions in the
// dp×cp group (dp_cp index = dp coordinate · cp + cp coordinate).
//
// Fixed CP is the case where every micro-batch has dp groups of size cp, group r on ranks
// [r·cp, (r+1)·cp): group r of micro-batch k is the pack of DP replica r (pack(k, r)). Dynamic CP
// gives every micro-batch groups of their own sizes.
//
// Storage is flat (one id array, one offset per group and per micro-batch), so a plan of a million
// samples costs a few arrays, not an allocation per pack.

#include <cstdint>
#include <iterator>
#include <span>
#include <vector>

namespace thdpack {

class Plan;

/// One CP group of one micro-batch, owning its ids (for building plans and for tests).
struct CpGroup {
  int first_rank = 0;
  int size = 1;
  std::vector<int64_t> ids;

  bool operator==(const CpGroup&) const = default;
};

/// One CP group of a plan, borrowed from it: valid while the plan lives and is not changed.
struct CpGroupView {
  int first_rank = 0;
  int size = 1;
  std::span<const int64_t> ids;

  /// Whether `rank` is a member.
  bool holds(int rank) const { return rank >= first_rank && rank < first_rank + size; }
};

/// The groups of one micro-batch, in rank order; a range of CpGroupView.
class MicrobatchView {
 public:
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = CpGroupView;
    using difference_type = std::ptrdiff_t;
    Iterator() = default;
    Iterator(const Plan* plan, int64_t group) : plan_(plan), group_(group) {}
    CpGroupView operator*() const;
    Iterator& operator++() {
      ++group_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator old = *this;
      ++group_;
      return old;
    }
    bool operator==(const Iterator&) const = default;

   private:
    const Plan* plan_ = nullptr;
    int64_t group_ = 0;
  };

  MicrobatchView(const Plan* plan, int64_t first_group, int64_t end_group)
      : plan_(plan), first_(first_group), end_(end_group) {}
  /// Number of groups.
  int64_t size() const { return end_ - first_; }
  /// Group `i` in rank order; 0 <= i < size().
  CpGroupView operator[](int64_t i) const;
  Iterator begin() const { return {plan_, first_}; }
  Iterator end() const { return {plan_, end_}; }
  /// The group that holds `rank` (its size is that rank's local CP size). Throws
  /// InvalidArgument when no group holds it.
  CpGroupView group_of(int rank) const;
  /// Owning copies of the groups, in rank order.
  std::vector<CpGroup> groups() const;
  /// Index (in the plan, see Plan::group_at) of this micro-batch's first group.
  int64_t first_group() const { return first_; }

 private:
  const Plan* plan_;
  int64_t first_;
  int64_t end_;
};

class Plan {
 public:
  /// An empty plan (no micro-batch) over dp·cp = 1 rank.
  Plan() = default;
  /// An empty plan over the dp×cp group of a topology; add micro-batches with begin_microbatch and
  /// add_group. Throws InvalidArgument when dp or cp < 1.
  Plan(int dp, int cp);
  /// A fixed-CP plan: `packs` in micro-batch-major order (pack k·dp + r is micro-batch k of DP
  /// replica r, run on ranks [r·cp, (r+1)·cp)). Their count must be a multiple of dp.
  Plan(int dp, int cp, const std::vector<std::vector<int64_t>>& packs);
  /// The same from flat arrays: pack p holds ids[offsets[p] .. offsets[p+1]); offsets starts at 0,
  /// is non-decreasing and ends at ids.size(); offsets.size()-1 is a multiple of dp.
  Plan(int dp, int cp, std::vector<int64_t> offsets, std::vector<int64_t> ids);

  /// Room for this many more micro-batches, groups and ids (a builder that knows the sizes).
  void reserve(int64_t microbatches, int64_t groups, int64_t ids);
  /// Starts a new micro-batch (empty until groups are added).
  void begin_microbatch();
  /// Appends a group to the last micro-batch (begin_microbatch first). The plan's contracts are
  /// checked where it is used (validate_plan, Pipeline), not here: a builder may add in any order.
  void add_group(int first_rank, int size, std::span<const int64_t> ids);
  void add_group(const CpGroup& group) { add_group(group.first_rank, group.size, group.ids); }

  /// The dp×cp layout the plan was made for; ranks() = G = dp·cp.
  int dp() const { return dp_; }
  int cp() const { return cp_; }
  int ranks() const { return dp_ * cp_; }

  /// Micro-batches (the same count on every rank: K).
  int64_t num_microbatches() const;
  MicrobatchView microbatch(int64_t k) const;

  /// Groups over all micro-batches, and group `index` in micro-batch-major, rank order.
  int64_t num_groups() const { return static_cast<int64_t>(group_starts_.size()) - 1; }
  CpGroupView group_at(int64_t index) const;
  /// All ids, group after group.
  std::span<const int64_t> all_ids() const { return ids_; }

  /// Whether every micro-batch is dp groups of size cp, group r on ranks [r·cp, (r+1)·cp): what
  /// the fixed-CP schedulers make.
  bool is_fixed_cp() const;

  /// Fixed-CP vocabulary: a group is a pack, group r of micro-batch k the pack of DP replica r.
  int64_t num_packs() const { return num_groups(); }
  std::span<const int64_t> pack_at(int64_t index) const { return group_at(index).ids; }
  /// Ordered ids of micro-batch k of DP replica `replica` in a fixed-CP plan.
  std::span<const int64_t> pack(int64_t k, int replica) const { return microbatch(k)[replica].ids; }

  /// Equal layouts, groups and ids, however each plan stores them.
  bool operator==(const Plan& other) const;

 private:
  /// Stores the group layout explicitly (a builder is about to add a group).
  void make_explicit();

  int dp_ = 1;
  int cp_ = 1;
  /// A fixed-CP plan made from packs stores no layout: group g is on ranks (g mod dp)·cp, size cp,
  /// and micro-batch k holds groups k·dp .. k·dp+dp-1. Otherwise the three arrays below hold it.
  bool implicit_fixed_cp_ = false;
  std::vector<int64_t> microbatch_starts_{0};  ///< first group of each micro-batch, then the end
  std::vector<int> first_ranks_;               ///< per group
  std::vector<int> sizes_;                     ///< per group
  std::vector<int64_t> group_starts_{0};       ///< first id of each group, then the end
  std::vector<int64_t> ids_;
};

}  // namespace thdpack
