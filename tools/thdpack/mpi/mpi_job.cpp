// run_mpi_job: MPI set-up, error reporting and shutdown shared by the mpirun subcommands.

#include "mpi/mpi_job.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "thdpack/core/errors.hpp"

namespace thdpack::cli {
namespace {

// How long MPI_Abort may take before the rank ends itself.
constexpr int kAbortGraceSeconds = 3;

// How a rank's body ended.
struct Outcome {
  int code = 0;       // exit code: 0, 2, 3 or 4
  int comm = 0;       // 1: a CommError (often a consequence of another rank's failure)
  std::string error;  // the message, when code != 0
};

// Completes `request` by polling until `deadline`; false when it did not complete in time (or MPI
// reported an error).
bool complete_by(MPI_Request& request, std::chrono::steady_clock::time_point deadline) {
  int done = 0;
  while (true) {
    if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (done) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Every rank's outcome, or nothing when some rank did not arrive by the deadline.
bool gather_outcomes(const Outcome& mine, int size, std::chrono::steady_clock::time_point deadline,
                     std::vector<Outcome>& all) {
  const int head[3] = {mine.code, mine.comm, static_cast<int>(mine.error.size())};
  std::vector<int> heads(static_cast<size_t>(3 * size));
  MPI_Request request = MPI_REQUEST_NULL;
  if (MPI_Iallgather(head, 3, MPI_INT, heads.data(), 3, MPI_INT, MPI_COMM_WORLD, &request) !=
          MPI_SUCCESS ||
      !complete_by(request, deadline)) {
    return false;
  }
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  int total = 0;
  for (int r = 0; r < size; ++r) {
    counts[static_cast<size_t>(r)] = heads[static_cast<size_t>(3 * r + 2)];
    displs[static_cast<size_t>(r)] = total;
    total += counts[static_cast<size_t>(r)];
  }
  std::vector<char> text(static_cast<size_t>(total) + 1);
  if (MPI_Iallgatherv(mine.error.data(), head[2], MPI_CHAR, text.data(), counts.data(),
                      displs.data(), MPI_CHAR, MPI_COMM_WORLD, &request) != MPI_SUCCESS ||
      !complete_by(request, deadline)) {
    return false;
  }
  all.resize(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    const auto i = static_cast<size_t>(r);
    all[i] = {heads[3 * i], heads[3 * i + 1],
              std::string(text.data() + displs[i], static_cast<size_t>(counts[i]))};
  }
  return true;
}

// The one line for the job: the error every rank saw, or the first failure that is not a
// communication failure (the others usually follow from it), naming its rank.
std::string job_error_line(const std::vector<Outcome>& all, int& code) {
  int cause = -1, failed = 0;
  bool alike = true;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].code == 0) continue;
    ++failed;
    alike = alike && all[r].error == all[0].error;
    if (cause < 0 || (all[static_cast<size_t>(cause)].comm && !all[r].comm)) {
      cause = static_cast<int>(r);
    }
  }
  const Outcome& root = all[static_cast<size_t>(cause)];
  code = root.code;
  if (alike && failed == static_cast<int>(all.size())) return "thdpack: error: " + root.error;
  std::string line = message("thdpack: error on rank ", cause, ": ", root.error);
  if (failed > 1) line += message(" (", failed - 1, " other ranks failed too)");
  if (root.comm) {  // only communication failures: the ranks that finished left the others waiting
    std::string finished;
    for (size_t r = 0; r < all.size(); ++r) {
      if (all[r].code == 0) finished += message(finished.empty() ? "" : ", ", r);
    }
    if (!finished.empty()) {
      line += "; ranks " + finished + " finished without entering it";
    }
  }
  return line;
}

}  // namespace

int run_mpi_job(int thread_level, double timeout_seconds,
                const std::function<int(int rank, int size)>& body) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, thread_level, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Outcome mine;
  try {
    mine.code = body(rank, size);
  } catch (const InvalidArgument& e) {
    mine = {2, 0, e.what()};
  } catch (const CommError& e) {
    mine = {3, 1, e.what()};
  } catch (const Error& e) {
    mine = {3, 0, e.what()};
  } catch (const std::exception& e) {
    mine = {4, 0, std::string("unexpected error: ") + e.what()};
  }
  if (mine.code != 0 && mine.error.empty()) mine.error = message("exit code ", mine.code);

  const double wait = (timeout_seconds > 0 ? timeout_seconds : 0) + 10.0;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(wait));
  std::vector<Outcome> all;
  if (!gather_outcomes(mine, size, deadline, all)) {
    // Some rank died or hangs: MPI cannot shut down cleanly, so stop the job from here.
    std::fprintf(stderr, "thdpack: error on rank %d: %s\n", rank,
                 mine.code != 0
                     ? mine.error.c_str()
                     : "a peer rank did not finish (it died or hangs); stopping the job");
    const int code = mine.code != 0 ? mine.code : 3;
    // MPI_Abort asks mpirun to end the job through this host's daemon; with the link to mpirun
    // gone that never returns. The rank is out either way, a few seconds later at most.
    std::thread([code] {
      std::this_thread::sleep_for(std::chrono::seconds(kAbortGraceSeconds));
      std::_Exit(code);
    }).detach();
    MPI_Abort(MPI_COMM_WORLD, code);
    return code;
  }
  int code = 0;
  bool any_failed = false;
  for (const Outcome& o : all) any_failed = any_failed || o.code != 0;
  if (any_failed) {
    const std::string line = job_error_line(all, code);
    if (rank == 0) std::fprintf(stderr, "%s\n", line.c_str());
  }
  MPI_Finalize();
  return code;
}

}  // namespace thdpack::cli
