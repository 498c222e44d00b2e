// A job run the way the thdpack CLI runs its mpirun subcommands (run_mpi_job), in which ranks end
// differently: `skip` (rank 1 skips a barrier its peers enter), `fail` (rank 1 fails on its own
// before the barrier) or `ok`. check_job_outcome.py runs it under mpirun and checks that the job
// prints one line naming the right rank, exits with the right code and never aborts.

#include <mpi.h>

#include <string>

#include "mpi/mpi_job.hpp"
#include "thdpack/comm/mpi_communicator.hpp"
#include "thdpack/core/errors.hpp"

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "ok";
  constexpr double kTimeout = 2.0;
  return thdpack::cli::run_mpi_job(MPI_THREAD_FUNNELED, kTimeout, [&](int rank, int) {
    thdpack::MpiCommunicator world(MPI_COMM_WORLD, {.timeout_seconds = kTimeout});
    if (rank == 1 && scenario == "skip") return 0;
    if (rank == 1 && scenario == "fail") throw thdpack::InvalidArgument("bad input on one rank");
    world.barrier();
    return 0;
  });
}
