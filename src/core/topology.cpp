#include "thdpack/core/topology.hpp"

#include <algorithm>
#include <limits>
#include <sstream>

#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

// Members of TopologyConfig and Coordinates, indexed by Dim.
constexpr int TopologyConfig::*kSizeOf[] = {&TopologyConfig::tp, &TopologyConfig::cp,
                                            &TopologyConfig::dp, &TopologyConfig::pp};
constexpr int Coordinates::*kCoordinateOf[] = {&Coordinates::tp, &Coordinates::cp, &Coordinates::dp,
                                               &Coordinates::pp};

std::array<Dim, 4> parse_order(const std::string& order) {
  std::array<Dim, 4> dims{};
  int count = 0;
  std::array<bool, 4> seen{};
  bool seen_ep = false;
  if (!order.empty() && order.back() == '-') {
    fail("rank order '", order,
         "': empty dimension after the last '-'; use a permutation of tp, cp, "
         "ep, dp, pp such as tp-cp-ep-dp-pp");
  }
  std::stringstream in(order);
  std::string token;
  while (std::getline(in, token, '-')) {
    if (token == "ep") {  // ep has size 1 in the dense decomposition
      if (seen_ep) fail("rank order '", order, "' names 'ep' twice");
      seen_ep = true;
      continue;
    }
    Dim d;
    if (token == "tp") {
      d = Dim::kTp;
    } else if (token == "cp") {
      d = Dim::kCp;
    } else if (token == "dp") {
      d = Dim::kDp;
    } else if (token == "pp") {
      d = Dim::kPp;
    } else {
      fail("rank order '", order, "': unknown dimension '", token,
           "'; use a permutation of tp, cp, ep, dp, pp such as tp-cp-ep-dp-pp");
    }
    auto i = static_cast<size_t>(d);
    if (seen[i] || count == 4) {
      fail("rank order '", order, "' names '", token, "' twice");
    }
    seen[i] = true;
    dims[static_cast<size_t>(count++)] = d;
  }
  if (count != 4) {
    fail("rank order '", order,
         "' must name each of tp, cp, dp, pp once (ep optional), e.g. "
         "tp-cp-ep-dp-pp");
  }
  return dims;
}

void require_positive(int value, const char* name) {
  check(value >= 1, name, " must be >= 1, got ", value);
}

}  // namespace

Topology::Topology(const TopologyConfig& config) : config_(config) {
  require_positive(config.tp, "tp");
  require_positive(config.cp, "cp");
  require_positive(config.dp, "dp");
  require_positive(config.pp, "pp");
  require_positive(config.ep, "ep");
  require_positive(config.vpp, "vpp");
  check(config.vpp_group >= 0, "vpp_group must be >= 0 (0 means pp), got ", config.vpp_group);
  // Every product of sizes the topology forms (world size, strides, dp*cp) must fit an int.
  int64_t world = 1;
  for (const int size : {config.tp, config.cp, config.dp, config.pp}) {
    world *= size;
    if (world > std::numeric_limits<int>::max()) {
      fail("tp*cp*dp*pp = ", config.tp, "*", config.cp, "*", config.dp, "*", config.pp,
           " ranks exceeds 2^31-1");
    }
  }
  check((config.dp * config.cp) % config.ep == 0, "ep=", config.ep,
        " must divide dp*cp=", config.dp * config.cp);
  order_ = parse_order(config.order);
  int stride = 1;
  for (Dim d : order_) {
    stride_of_[static_cast<size_t>(d)] = stride;
    stride *= size_of(d);
  }
}

int Topology::microbatch_multiple() const {
  if (config_.vpp <= 1) return 1;
  return config_.vpp_group > 0 ? config_.vpp_group : config_.pp;
}

int Topology::size_of(Dim d) const {
  return config_.*kSizeOf[static_cast<size_t>(d)];
}

void Topology::check_world_size(int world) const {
  if (world != world_size()) {
    fail("world size ", world, " does not match the layout ", describe(),
         ", which needs tp*cp*dp*pp = ", world_size(), " ranks");
  }
}

Coordinates Topology::coordinates(int rank) const {
  if (rank < 0 || rank >= world_size()) {
    fail("rank ", rank, " is outside the world of size ", world_size(), " (", describe(), ")");
  }
  Coordinates c;
  int rest = rank;
  for (Dim d : order_) {
    c.*kCoordinateOf[static_cast<size_t>(d)] = rest % size_of(d);
    rest /= size_of(d);
  }
  return c;
}

int Topology::rank_of(const Coordinates& c) const {
  int rank = 0;
  for (Dim d : order_) {
    const int v = c.*kCoordinateOf[static_cast<size_t>(d)];
    if (v < 0 || v >= size_of(d)) {
      static constexpr const char* kNames[] = {"tp", "cp", "dp", "pp"};
      fail("coordinate ", kNames[static_cast<size_t>(d)], "=", v, " is outside [0, ", size_of(d),
           ") in ", describe());
    }
    rank += v * stride_of_[static_cast<size_t>(d)];
  }
  return rank;
}

std::vector<int> Topology::group_ranks(GroupKind kind, int rank) const {
  const Coordinates me = coordinates(rank);
  std::vector<int> ranks;
  auto with = [&](auto&& mutate, int count) {
    for (int i = 0; i < count; ++i) {
      Coordinates c = me;
      mutate(c, i);
      ranks.push_back(rank_of(c));
    }
  };
  switch (kind) {
    case GroupKind::kTp:
      with([](Coordinates& c, int i) { c.tp = i; }, config_.tp);
      break;
    case GroupKind::kCp:
      with([](Coordinates& c, int i) { c.cp = i; }, config_.cp);
      break;
    case GroupKind::kDp:
      with([](Coordinates& c, int i) { c.dp = i; }, config_.dp);
      break;
    case GroupKind::kPp:
      with([](Coordinates& c, int i) { c.pp = i; }, config_.pp);
      break;
    case GroupKind::kDpCp: {
      const int cp = config_.cp;
      with([cp](Coordinates& c, int i) { c.cp = i % cp, c.dp = i / cp; }, config_.dp * cp);
      break;
    }
    case GroupKind::kEp: {
      const int cp = config_.cp;
      const int base = (me.cp + cp * me.dp) / config_.ep * config_.ep;
      with([cp, base](Coordinates& c, int i) { c.cp = (base + i) % cp, c.dp = (base + i) / cp; },
           config_.ep);
      break;
    }
  }
  return ranks;
}

int Topology::group_rank(GroupKind kind, int rank) const {
  const auto ranks = group_ranks(kind, rank);
  return static_cast<int>(std::find(ranks.begin(), ranks.end(), rank) - ranks.begin());
}

std::vector<std::vector<int>> Topology::all_groups(GroupKind kind) const {
  std::vector<std::vector<int>> groups;
  std::vector<bool> covered(static_cast<size_t>(world_size()), false);
  for (int r = 0; r < world_size(); ++r) {
    if (covered[static_cast<size_t>(r)]) continue;
    auto g = group_ranks(kind, r);
    for (int m : g) covered[static_cast<size_t>(m)] = true;
    groups.push_back(std::move(g));
  }
  return groups;
}

std::string Topology::describe() const {
  std::ostringstream out;
  out << "tp=" << config_.tp << " cp=" << config_.cp << " dp=" << config_.dp
      << " pp=" << config_.pp;
  if (config_.ep > 1) out << " ep=" << config_.ep;
  if (config_.vpp > 1) out << " vpp=" << config_.vpp << " vpp_group=" << microbatch_multiple();
  out << " (order " << config_.order << ")";
  return out.str();
}

}  // namespace thdpack
