#pragma once
// Subcommands started under mpirun: MPI set up around the command's body, and one error line for
// the whole job however its ranks ended.

#include <functional>

namespace thdpack::cli {

/// Initialises MPI with at least `thread_level` (an MPI_THREAD_* value) and MPI_ERRORS_RETURN on
/// MPI_COMM_WORLD (an MPI failure is an error code, never MPI's own abort), runs body(rank, size)
/// and maps thdpack errors to exit codes (2 bad input, 3 other thdpack errors, 4 anything else).
///
/// Then every rank, failed or not, exchanges its outcome with the others, waiting up to
/// `timeout_seconds` + 10 s (a peer may still be waiting that long in a collective this rank
/// left). When all ranks arrive: rank 0 prints one line (the error, when every rank failed alike;
/// else the error of the rank that failed first for a reason other than a communication failure,
/// naming it) and every rank exits with that error's code. When some rank never arrives (it died
/// or hangs), the failed ranks print their own line and MPI_Abort stops the job; a rank whose
/// MPI_Abort does not end it within 3 s (its link to mpirun is gone) ends itself with its code. A
/// rank is therefore out at most timeout + (timeout + 10 s) + 3 s after a peer or link dies;
/// mpirun itself may wait longer for a host it cannot reach (--timeout bounds the ranks, not it).
int run_mpi_job(int thread_level, double timeout_seconds,
                const std::function<int(int rank, int size)>& body);

}  // namespace thdpack::cli
