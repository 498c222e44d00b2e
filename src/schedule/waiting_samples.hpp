#pragma once
// The samples default_dynamic_cp has not placed yet, in classes of equal padded length, longest
// first. Megatron's rounds scan every waiting sample in that order; a sample that cannot be placed
// leaves the round as it was, so every later sample of its length waits too. A round thus visits
// each class at most once, and skips at once the classes that cannot fit (see the scheduler), so
// a batch costs about (samples + rounds) · log(classes) rather than samples · rounds.

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include "schedule/length_order.hpp"

namespace thdpack::detail {

/// The waiting samples of one length: ids [next, end) of WaitingSamples::ids(), ascending.
struct LengthClass {
  int64_t length;
  int cp_min;
  size_t next;
  size_t end;

  size_t waiting() const { return end - next; }
  bool empty() const { return next == end; }
};

class WaitingSamples {
 public:
  /// Classes of the samples `by_length` groups (it must outlive this), longest first;
  /// `cp_min_of(length)` gives each its cp_min (which does not grow as the lengths fall).
  template <typename CpMin>
  WaitingSamples(const LengthGroups& by_length, CpMin cp_min_of) : groups_(by_length) {
    classes_.reserve(groups_.lengths.size());
    for (size_t g = 0; g < groups_.lengths.size(); ++g) {
      classes_.push_back({groups_.lengths[g], cp_min_of(groups_.lengths[g]), groups_.starts[g],
                          groups_.starts[g + 1]});
    }
    open_.resize(classes_.size() + 1);
    std::iota(open_.begin(), open_.end(), size_t{0});
  }

  /// Every sample's id, by class; a class's waiting samples are ids()[next, end).
  const std::vector<int64_t>& ids() const { return groups_.ids; }
  size_t size() const { return classes_.size(); }
  LengthClass& operator[](size_t c) { return classes_[c]; }

  /// The first class at or after `from` that is not closed; size() when none is.
  size_t open_from(size_t from) {
    size_t root = from;
    while (open_[root] != root) root = open_[root];
    while (open_[from] != root) from = std::exchange(open_[from], root);
    return root;
  }
  /// Closes class `c` when it is empty; closed classes are skipped by open_from from then on.
  void close_if_empty(size_t c) {
    if (classes_[c].empty()) open_[c] = c + 1;
  }
  /// The first class at or after `from` whose length is <= `length`, or size().
  size_t first_at_most(size_t from, int64_t length) const {
    const auto begin = classes_.begin();
    return static_cast<size_t>(
        std::partition_point(begin + static_cast<std::ptrdiff_t>(from), classes_.end(),
                             [&](const LengthClass& c) { return c.length > length; }) -
        begin);
  }
  /// The first class at or after `from` whose cp_min is <= `cp`, or size().
  size_t first_cp_at_most(size_t from, int cp) const {
    const auto begin = classes_.begin();
    return static_cast<size_t>(
        std::partition_point(begin + static_cast<std::ptrdiff_t>(from), classes_.end(),
                             [&](const LengthClass& c) { return c.cp_min > cp; }) -
        begin);
  }

 private:
  const LengthGroups& groups_;
  std::vector<LengthClass> classes_;
  std::vector<size_t> open_;  ///< union-find over classes: the next one that may be open
};

}  // namespace thdpack::detail
