#pragma once
// Shared by mpi_test_main.cpp and the MPI tests.

#include <string>

namespace thdpack::mpi_test {

/// What constructing an MpiCommunicator threw before MPI_Init ran (main tries it first): the
/// CommError message, or "" when nothing or something else was thrown.
const std::string& error_before_mpi_init();

}  // namespace thdpack::mpi_test
