#pragma once
// A Communicator whose collectives are Python callables: how the pipeline runs over
// torch.distributed process groups (thdpack/comm.py) or anything else Python can reach.
//
// The Python object provides rank and size (ints) and the methods
//   allgatherv(send: np.uint8[n], counts: list[int]) -> bytes-like of sum(counts)
//   alltoallv(send: np.uint8[n], send_counts: list[int], recv_counts: list[int]) -> bytes-like
//   broadcast(data: np.uint8[n], root: int) -> bytes-like of n
//   allreduce(data: np.int64[n] | np.float64[n], op: "sum" | "max" | "min") -> array of n
//   barrier() -> None
// with the Communicator contract (communicator.hpp). Python exceptions become CommError naming the
// operation. Calls take the GIL; the pipeline releases it around its own work.
//
// The arrays passed in view thdpack's own buffers, valid only during the call (no copy). Objects
// that can write results in place may also provide
//   alltoallv_into(send, send_counts, recv: np.uint8[m], recv_counts) -> None
//   broadcast_into(data: np.uint8[n], root) -> None   (data updated in place)
// which are used instead of alltoallv / broadcast, saving a copy of every byte received.

#include <pybind11/pybind11.h>

#include "thdpack/comm/communicator.hpp"

namespace thdpack::python {

class CallbackCommunicator final : public Communicator {
 public:
  explicit CallbackCommunicator(pybind11::object impl);
  ~CallbackCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return backend_; }

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
  /// Not available: callback groups are made by the framework (CommError).
  std::unique_ptr<Communicator> split(int color, int key) override;
  void barrier() override;

 private:
  template <typename T>
  void reduce(std::span<T> data, ReduceOp op);

  pybind11::object impl_;
  int rank_ = 0;
  int size_ = 1;
  std::string backend_;
};

}  // namespace thdpack::python
