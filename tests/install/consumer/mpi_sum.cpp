// Uses an installed thdpack::mpi: every rank adds its rank number over an MpiCommunicator.

#include <mpi.h>

#include <cstdint>
#include <iostream>
#include <vector>

#include "thdpack/comm/mpi_communicator.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  {
    thdpack::MpiCommunicator world(MPI_COMM_WORLD);
    std::vector<int64_t> value{world.rank()};
    world.allreduce(value, thdpack::ReduceOp::kSum);
    const int64_t n = world.size();
    if (value[0] != n * (n - 1) / 2) status = 1;
    if (world.rank() == 0) std::cout << "mpi_sum over " << n << " ranks: " << value[0] << "\n";
  }
  MPI_Finalize();
  return status;
}
