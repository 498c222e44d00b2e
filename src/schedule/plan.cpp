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
  ids_.reserve(total);
  group_starts_.reserve(packs.size() + 1);
  for (const auto& p : packs) {
    ids_.insert(ids_.end(), p.begin(), p.end());
    group_starts_.push_back(static_cast<int64_t>(ids_.size()));
  }
  implicit_fixed_cp_ = true;
}

Plan::Plan(int dp, int cp, std::vector<int64_t> offsets, std::vector<int64_t> ids) : Plan(dp, cp) {
  if (offsets.empty() || offsets.front() != 0 ||
      offsets.back() != static_cast<int64_t>(ids.size()) ||
      !std::is_sorted(offsets.begin(), offsets.end())) {
    throw InternalError("plan: pack offsets must run from 0 to the number of ids, non-decreasing");
  }
  check<InternalError>((offsets.size() - 1) % static_cast<size_t>(dp) == 0,
                       "plan: ", offsets.size() - 1, " packs are not a multiple of dp=", dp);
  group_starts_ = std::move(offsets);
  ids_ = std::move(ids);
  implicit_fixed_cp_ = true;
}

void Plan::make_explicit() {
  if (!implicit_fixed_cp_) return;
  const auto groups = static_cast<size_t>(num_groups());
  const size_t microbatches = groups / static_cast<size_t>(dp_);
  first_ranks_.resize(groups);
  sizes_.assign(groups, cp_);
  microbatch_starts_.resize(microbatches + 1);
  for (size_t k = 0; k <= microbatches; ++k) {
    microbatch_starts_[k] = static_cast<int64_t>(k) * dp_;
    if (k == microbatches) break;
    for (int r = 0; r < dp_; ++r) first_ranks_[k * static_cast<size_t>(dp_) + r] = r * cp_;
  }
  implicit_fixed_cp_ = false;
}

int64_t Plan::num_microbatches() const {
  return implicit_fixed_cp_ ? num_groups() / dp_
                            : static_cast<int64_t>(microbatch_starts_.size()) - 1;
}

bool Plan::operator==(const Plan& other) const {
  if (dp_ != other.dp_ || cp_ != other.cp_ || group_starts_ != other.group_starts_ ||
      ids_ != other.ids_ || num_microbatches() != other.num_microbatches()) {
    return false;
  }
  for (int64_t k = 0; k < num_microbatches(); ++k) {
    const MicrobatchView a = microbatch(k);
    const MicrobatchView b = other.microbatch(k);
    if (a.first_group() != b.first_group() || a.size() != b.size()) return false;
  }
  for (int64_t g = 0; g < num_groups(); ++g) {
    const CpGroupView a = group_at(g);
    const CpGroupView b = other.group_at(g);
    if (a.first_rank != b.first_rank || a.size != b.size) return false;
  }
  return true;
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
  make_explicit();
  first_ranks_.push_back(first_rank);
  sizes_.push_back(size);
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  group_starts_.push_back(static_cast<int64_t>(ids_.size()));
  ++microbatch_starts_.back();
}

MicrobatchView Plan::microbatch(int64_t k) const {
  check(k >= 0 && k < num_microbatches(), "micro-batch ", k, " outside [0, ", num_microbatches(),
        ")");
  if (implicit_fixed_cp_) return MicrobatchView(this, k * dp_, (k + 1) * dp_);
  const auto i = static_cast<size_t>(k);
  return MicrobatchView(this, microbatch_starts_[i], microbatch_starts_[i + 1]);
}

CpGroupView Plan::group_at(int64_t index) const {
  check(index >= 0 && index < num_groups(), "pack index ", index, " outside [0, ", num_groups(),
        ")");
  const auto i = static_cast<size_t>(index);
  const auto begin = static_cast<size_t>(group_starts_[i]);
  const auto count = static_cast<size_t>(group_starts_[i + 1] - group_starts_[i]);
  const std::span<const int64_t> ids = std::span<const int64_t>(ids_).subspan(begin, count);
  if (implicit_fixed_cp_) return CpGroupView{static_cast<int>(index % dp_) * cp_, cp_, ids};
  return CpGroupView{first_ranks_[i], sizes_[i], ids};
}

bool Plan::is_fixed_cp() const {
  if (implicit_fixed_cp_) return true;
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
