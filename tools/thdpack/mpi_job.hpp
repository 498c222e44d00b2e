#pragma once
// Subcommands started under mpirun: MPI set up around the command's body, and errors reported
// once when every rank saw them, or by the one rank that did (which then stops the job).

#include <functional>

namespace thdpack::cli {

/// Initialises MPI with at least `thread_level` (an MPI_THREAD_* value), runs body(rank, size),
/// maps thdpack errors to exit codes (2 bad input, 3 other thdpack errors, 4 anything else),
/// prints the error once (rank 0) when all ranks failed alike within 10 s, or on the failing rank
/// followed by MPI_Abort otherwise, and finalises MPI.
int run_mpi_job(int thread_level, const std::function<int(int rank, int size)>& body);

}  // namespace thdpack::cli
