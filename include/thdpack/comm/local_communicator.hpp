#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// LocalCommunicator: N ranks as threads of one process, for unit tests and single-process
// simulation of multi-rank logic. It is not a distributed engine.
//
// Collectives rendezvous in shared memory. If a rank's function throws, every rank blocked in (or
// later entering) a collective gets CommError("peer failed"), so a failing test never hangs; a
// collective that does not complete within the timeout (a rank skipped it) also throws CommError.

#include <functional>
#include <memory>

#include "thdpack/comm/communicator.hpp"

namespace thdpack {

struct LocalOptions {
  /// Longest wait in one collective before CommError; <= 0 waits forever.
  double timeout_seconds = 60.0;
};

/// Runs fn(comm) on `size` threads, thread r holding rank r of one local communicator, and joins
/// them. If any rank throws, rethrows the exception of the lowest such rank whose error is not a
/// consequence of another rank's failure.
void run_local(int size, const std::function<void(Communicator&)>& fn,
               const LocalOptions& options = {});

/// The communicators of a local world of `size` ranks; each must be driven by its own thread.
std::vector<std::unique_ptr<Communicator>> make_local_world(int size,
                                                            const LocalOptions& options = {});

}  // namespace thdpack
