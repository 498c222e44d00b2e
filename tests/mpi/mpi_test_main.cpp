// main() of the MPI gtest binaries: initialises MPI (MPI_THREAD_FUNNELED), runs the tests on every
// rank and gives every rank the same exit status. Only rank 0 prints gtest's usual report; the
// other ranks print their failures alone, prefixed with their rank.

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "mpi_test_main.hpp"
#include "thdpack/comm/mpi_communicator.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack::mpi_test {
namespace {

std::string& error_before_init_storage() {
  static std::string message;
  return message;
}

/// The printer of ranks other than 0: failures only.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}

  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::printf("[rank %d] %s:%d: Failure\n%s\n", rank_,
                result.file_name() != nullptr ? result.file_name() : "unknown",
                result.line_number(), result.summary());
    std::fflush(stdout);
  }

  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (!info.result()->Failed()) return;
    std::printf("[rank %d] [  FAILED  ] %s.%s\n", rank_, info.test_suite_name(), info.name());
    std::fflush(stdout);
  }

 private:
  int rank_;
};

}  // namespace

const std::string& error_before_mpi_init() {
  return error_before_init_storage();
}

}  // namespace thdpack::mpi_test

int main(int argc, char** argv) {
  try {
    thdpack::MpiCommunicator comm(MPI_COMM_WORLD);
  } catch (const thdpack::CommError& e) {
    thdpack::mpi_test::error_before_init_storage() = e.what();
  } catch (...) {  // recorded as "" and reported by the test that checks it
  }

  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "MPI_Init_thread failed\n");
    return 2;
  }
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new thdpack::mpi_test::FailurePrinter(rank));
  }

  const int status = RUN_ALL_TESTS();
  // {failed tests, failed ranks}, summed over the ranks (rank 0 also counts tests that failed
  // only elsewhere).
  const int failed_tests = ::testing::UnitTest::GetInstance()->failed_test_count();
  int mine[2] = {std::max(failed_tests, status != 0 ? 1 : 0), status != 0 ? 1 : 0};
  int everywhere[2] = {0, 0};
  MPI_Allreduce(mine, everywhere, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0 && everywhere[0] > 0) {
    std::printf("[mpi] %d failed test(s) summed over the ranks; %d of %d rank(s) failed\n",
                everywhere[0], everywhere[1], size);
  }
  MPI_Finalize();
  return everywhere[0] == 0 ? 0 : 1;
}
