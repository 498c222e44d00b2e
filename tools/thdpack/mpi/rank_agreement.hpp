#pragma once
// Start-up agreement of the ranks of an mpirun job (`thdpack run`): every rank states whether its
// set-up succeeded and the options that decide which samples each step reads and which
// collectives it enters; then every rank throws the same error if any rank failed or any option
// differs from rank 0's. Under MPMD launches (`mpirun -n 2 thdpack run A : -n 2 thdpack run B`)
// ranks can be given different flags, and a difference would otherwise read other samples on
// some ranks or leave ranks waiting in collectives their peers skipped.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "thdpack/comm/communicator.hpp"
#include "thdpack/core/dataset.hpp"

namespace thdpack::cli {

/// One option as ranks compare it: a name ("--global-batch") and its resolved value as text.
using AgreedOption = std::pair<std::string, std::string>;

/// What a rank's set-up gave: its error (empty when it succeeded; `code` 2 for bad input, 3 for
/// other thdpack errors, 4 anything else) and the options it resolved.
struct RankSetup {
  std::string error;
  int code = 0;
  std::vector<AgreedOption> options;
};

/// Collective over `world`. Throws on every rank alike: the error of the lowest failing rank
/// ("rank R: ...", InvalidArgument for code 2, Error otherwise), else InvalidArgument naming the
/// first option that differs from rank 0's, both values and the rank.
void agree_across_ranks(Communicator& world, const RankSetup& mine);

/// A digest of what the dataset holds: its size and the tokens, loss mask and labels of up to
/// `probes` samples spread evenly over it. Equal digests on two ranks mean the same source with
/// very high probability; cheap enough for start-up (reads `probes` samples).
std::string dataset_fingerprint(const Dataset& dataset, int64_t probes = 64);

}  // namespace thdpack::cli
