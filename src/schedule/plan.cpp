#include "thdpack/schedule/plan.hpp"

#include <algorithm>
#include <string>

#include "thdpack/core/errors.hpp"

namespace thdpack {

CpGroupView MicrobatchView::Iterator::operator*() const {
  return plan_->group_at(group_);
}

CpGroupView MicrobatchView::operator[](int64_t i) const {
  check(i >= 0 && i < size(), "group ", i, " outside [0, ", size(), ") of a micro-batch");
  return plan_->group_at(first_ + i);
}

CpGroupView MicrobatchView::group_of(int rank) const {
  for (const CpGroupView g : *this) {
    if (g.holds(rank)) return g;
  }
  fail("plan: no group of the micro-batch holds rank ", rank);
}

std::vector<CpGroup> MicrobatchView::groups() const {
  std::vector<CpGroup> out;
  out.reserve(static_cast<size_t>(size()));
  for (const CpGroupView g : *this) {
    out.push_back({g.first_rank, g.size, std::vector<int64_t>(g.ids.begin(), g.ids.end())});
  }
  return out;
}

Plan::Plan(int dp, int cp) : dp_(dp), cp_(cp) {
  if (dp < 1 || cp < 1) throw InvalidArgument("plan: dp and cp must be >= 1");
  check(static_cast<int64_t>(dp) * cp <= INT32_MAX, "plan: dp*cp = ", static_cast<int64_t>(dp) * cp,
        " does not fit in int");
}

Plan::Plan(int dp, int cp, const std::vector<std::vector<int64_t>>& packs) : Plan(dp, cp) {
  check<InternalError>(packs.size() % static_cast<size_t>(dp) == 0, "plan: ", packs.size(),
                       " packs are not a multiple of dp=", dp);
  size_t total = 0;
  for (const auto& p : packs) total += p.size();
  reserve(static_cast<int64_t>(packs.size() / static_cast<size_t>(dp)),
          static_cast<int64_t>(packs.size()), static_cast<int64_t>(total));
  for (size_t p = 0; p < packs.size(); ++p) {
    if (p % static_cast<size_t>(dp) == 0) begin_microbatch();
    add_group(static_cast<int>(p % static_cast<size_t>(dp)) * cp, cp, packs[p]);
  }
}

Plan::Plan(int dp, int cp, std::vector<int64_t> offsets, std::vector<int64_t> ids) : Plan(dp, cp) {
  if (offsets.empty() || offsets.front() != 0 ||
      offsets.back() != static_cast<int64_t>(ids.size()) ||
      !std::is_sorted(offsets.begin(), offsets.end())) {
    throw InternalError("plan: pack offsets must run from 0 to the number of ids, non-decreasing");
  }
  const size_t packs = offsets.size() - 1;
  check<InternalError>(packs % static_cast<size_t>(dp) == 0, "plan: ", packs,
                       " packs are not a multiple of dp=", dp);
  group_starts_ = std::move(offsets);
  ids_ = std::move(ids);
  first_ranks_.resize(packs);
  sizes_.assign(packs, cp);
  for (size_t p = 0; p < packs; ++p) first_ranks_[p] = static_cast<int>(p % dp) * cp;
  microbatch_starts_.resize(packs / dp + 1);
  for (size_t k = 0; k < microbatch_starts_.size(); ++k) {
    microbatch_starts_[k] = static_cast<int64_t>(k * dp);
  }
}

void Plan::reserve(int64_t microbatches, int64_t groups, int64_t ids) {
  microbatch_starts_.reserve(microbatch_starts_.size() + static_cast<size_t>(microbatches));
  first_ranks_.reserve(first_ranks_.size() + static_cast<size_t>(groups));
  sizes_.reserve(sizes_.size() + static_cast<size_t>(groups));
  group_starts_.reserve(group_starts_.size() + static_cast<size_t>(groups));
  ids_.reserve(ids_.size() + static_cast<size_t>(ids));
}

void Plan::begin_microbatch() {
  microbatch_starts_.push_back(microbatch_starts_.back());
}

void Plan::add_group(int first_rank, int size, std::span<const int64_t> ids) {
  if (num_microbatches() < 1) throw InternalError("plan: add_group before begin_microbatch");
  first_ranks_.push_back(first_rank);
  sizes_.push_back(size);
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  group_starts_.push_back(static_cast<int64_t>(ids_.size()));
  ++microbatch_starts_.back();
}

MicrobatchView Plan::microbatch(int64_t k) const {
  check(k >= 0 && k < num_microbatches(), "micro-batch ", k, " outside [0, ", num_microbatches(),
        ")");
  const auto i = static_cast<size_t>(k);
  return MicrobatchView(this, microbatch_starts_[i], microbatch_starts_[i + 1]);
}

CpGroupView Plan::group_at(int64_t index) const {
  check(index >= 0 && index < num_groups(), "pack index ", index, " outside [0, ", num_groups(),
        ")");
  const auto i = static_cast<size_t>(index);
  const auto begin = static_cast<size_t>(group_starts_[i]);
  const auto count = static_cast<size_t>(group_starts_[i + 1] - group_starts_[i]);
  return CpGroupView{first_ranks_[i], sizes_[i],
                     std::span<const int64_t>(ids_).subspan(begin, count)};
}

bool Plan::is_fixed_cp() const {
  for (int64_t k = 0; k < num_microbatches(); ++k) {
    const auto i = static_cast<size_t>(k);
    if (microbatch_starts_[i + 1] - microbatch_starts_[i] != dp_) return false;
  }
  for (size_t g = 0; g < sizes_.size(); ++g) {
    if (sizes_[g] != cp_ || first_ranks_[g] != static_cast<int>(g % dp_) * cp_) return false;
  }
  return true;
}

}  // namespace thdpack
