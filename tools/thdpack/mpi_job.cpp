// run_mpi_job: MPI set-up, error reporting and shutdown shared by the mpirun subcommands.

#include "mpi_job.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "thdpack/core/errors.hpp"

namespace thdpack::cli {
namespace {

// Waits up to `seconds` for every rank to reach this point after an error. True when all did (the
// error was seen everywhere and MPI can shut down cleanly); false when some rank is elsewhere.
bool all_ranks_failed(double seconds) {
  MPI_Request request;
  if (MPI_Ibarrier(MPI_COMM_WORLD, &request) != MPI_SUCCESS) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int done = 0;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return done != 0;
}

}  // namespace

int run_mpi_job(int thread_level, const std::function<int(int rank, int size)>& body) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, thread_level, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int code = 0;
  std::string error;
  try {
    code = body(rank, size);
  } catch (const InvalidArgument& e) {
    code = 2;
    error = e.what();
  } catch (const Error& e) {
    code = 3;
    error = e.what();
  } catch (const std::exception& e) {
    code = 4;
    error = std::string("unexpected error: ") + e.what();
  }
  if (code != 0) {
    // Errors thdpack detects from gathered data are raised on every rank alike: print once and
    // shut down cleanly. Anything else: this rank alone knows, so stop the job.
    const bool everywhere = all_ranks_failed(10.0);
    if (rank == 0 || !everywhere) {
      std::fprintf(stderr, "thdpack: error%s: %s\n",
                   everywhere ? "" : (" on rank " + std::to_string(rank)).c_str(), error.c_str());
    }
    if (!everywhere) MPI_Abort(MPI_COMM_WORLD, code);
  }
  MPI_Finalize();
  return code;
}

}  // namespace thdpack::cli
