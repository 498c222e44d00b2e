#pragma once
// MoE dispatch/combine checks that run on any Communicator (local threads in unit tests, MPI ranks
// under mpirun), each comparing with what the rank can compute alone.

#include <cstdint>

#include "thdpack/comm/communicator.hpp"

namespace thdpack::testing {

/// Random routing with per-rank token counts including zero; checks identity experts, per-expert
/// linear experts against a dense reference, padded == unpadded, and the backward adjoints.
/// gtest failures are reported on the rank where they happen.
void check_moe_dispatch(Communicator& ep, uint64_t seed);

/// Bad routing or disagreeing shapes fail with InvalidArgument on every rank (no hang).
void check_moe_validation(Communicator& ep);

}  // namespace thdpack::testing
