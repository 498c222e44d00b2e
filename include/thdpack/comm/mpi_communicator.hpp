#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// The MPI backend of Communicator (communicator.hpp).
//
// It duplicates the caller's MPI communicator (thdpack's traffic never mixes with the caller's),
// sets MPI_ERRORS_RETURN on the duplicate and reports any failure as CommError naming the
// operation, the MPI error text and the rank. It never calls MPI_Init or MPI_Finalize: the
// application does (the thdpack CLI does, as an application). Collectives run as non-blocking MPI
// operations completed under a deadline, so a peer that died or a rank that skipped a collective
// ends in a CommError after `timeout_seconds` instead of a silent hang.
//
// Failures: after a timeout or an error inside MPI the communicator is unusable and every later
// call throws CommError. MPI cannot cancel a posted collective, so it stays posted (and may still
// write into the receive buffer should the peers arrive late); the ranks may then disagree on
// which collective comes next. Create a new communicator or abort the job. Bad arguments (sizes
// that do not match the counts, a root out of range) are found before anything is posted and
// leave the communicator usable, but peers that passed valid arguments time out in that call.
//
// Sizes: MPI counts and displacements are int. allgatherv, broadcast and allreduce move more than
// INT_MAX bytes (elements for allreduce) in several MPI operations. alltoallv and ialltoallv throw
// CommError when a count or offset to or from another rank exceeds INT_MAX bytes (the part a rank
// sends itself is copied locally and has no limit): split such an exchange into several calls.
//
// Stats: every call counts one collective when it is posted (split included). Bytes, to and from
// other ranks only: allgatherv sends its own part x (size - 1) and receives the others' parts;
// alltoallv sends and receives its non-self parts; broadcast's root sends data x (size - 1) and
// every other rank receives data; allreduce counts its data once sent and once received (nothing
// on a single rank); barrier and split move no bytes.
//
// ialltoallv's request measures the deadline from the post: test() returns true once the
// exchange completed or the deadline passed, and wait() then throws CommError for a failure.

#include <mpi.h>

#include <climits>
#include <cstdint>
#include <memory>
#include <vector>

#include "thdpack/comm/communicator.hpp"

namespace thdpack {

struct MpiOptions {
  /// Longest wait for one collective before CommError; <= 0 waits forever.
  double timeout_seconds = 600.0;
};

class MpiCommunicator final : public Communicator {
 public:
  /// Duplicates `comm` (collective over it). Throws CommError if MPI is not initialised (or
  /// already finalised), `comm` is MPI_COMM_NULL or the duplication fails; InvalidArgument if
  /// options.timeout_seconds is NaN.
  explicit MpiCommunicator(MPI_Comm comm, const MpiOptions& options = {});
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  bool allows_other_threads() const override;

  void allgatherv(std::span<const std::byte> send, std::span<std::byte> recv,
                  std::span<const int64_t> counts) override;
  void alltoallv(std::span<const std::byte> send, std::span<const int64_t> send_counts,
                 std::span<std::byte> recv, std::span<const int64_t> recv_counts) override;
  std::unique_ptr<CommRequest> ialltoallv(std::span<const std::byte> send,
                                          std::span<const int64_t> send_counts,
                                          std::span<std::byte> recv,
                                          std::span<const int64_t> recv_counts) override;
  void broadcast(std::span<std::byte> data, int root) override;
  void allreduce(std::span<int64_t> data, ReduceOp op) override;
  void allreduce(std::span<double> data, ReduceOp op) override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  void barrier() override;

  /// The duplicated communicator (for interoperating code; do not free it).
  MPI_Comm handle() const { return comm_; }

 private:
  class Request;  // the CommRequest of ialltoallv
  struct State;   // failure record and abandoned requests, shared with this communicator's requests
  friend class MpiCommunicatorTestPeer;  // tests lower max_mpi_count_ to reach the chunked paths

  MpiCommunicator(MPI_Comm owned, const MpiOptions& options, bool take_ownership);
  void post_broadcast_chunks(std::byte* data, int64_t bytes, int root, const char* op,
                             std::vector<MPI_Request>& requests);
  void allreduce_bytes(void* data, int64_t count, int64_t element_bytes, MPI_Datatype type,
                       ReduceOp op);

  MPI_Comm comm_ = MPI_COMM_NULL;
  MpiOptions options_;
  int rank_ = 0;
  int size_ = 1;
  /// Largest count or displacement handed to one MPI call (MPI takes int); INT_MAX except in tests.
  int64_t max_mpi_count_ = INT_MAX;
  std::shared_ptr<State> state_;
};

}  // namespace thdpack
