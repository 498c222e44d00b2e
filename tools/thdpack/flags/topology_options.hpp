#pragma once
// The parallel-layout flags shared by subcommands: --tp --cp --dp --pp --ep --vpp --vpp-group
// --order --sequence-parallel.

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "thdpack/core/topology.hpp"

namespace thdpack::cli {

struct TopologyFlags {
  int tp = 1;
  std::optional<int> cp;  // default from the workload, else 1
  int dp = 8;
  int pp = 1;
  int ep = 1;
  int vpp = 1;
  int vpp_group = 0;
  std::string order = "tp-cp-ep-dp-pp";
  bool sequence_parallel = false;

  void add_to(CLI::App& command);
  /// The topology, with `default_cp` when --cp was not given.
  Topology resolve(int default_cp) const;
};

}  // namespace thdpack::cli
