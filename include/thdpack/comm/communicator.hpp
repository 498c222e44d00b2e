#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Communicator: the narrow, byte-oriented interface through which ranks talk (layer "comm").
//
// Backends: MPI (mpi_communicator.hpp, any number of machines), and LocalCommunicator (ranks as
// threads of one process, for unit tests and single-process simulation only).
//
// Collective order: every rank of a communicator calls the same collectives in the same order with
// matching arguments (the same root, matching counts); a rank that does not is a bug that backends
// report as a CommError after their timeout rather than hang on.
// Errors: every failure, including arguments that do not fit the contract (sizes, roots, counts),
// is a CommError naming the operation. An argument error found before anything was posted leaves
// the communicator usable, but only that rank knows: its peers time out in the same call. After
// any other CommError the communicator is unusable (a posted collective cannot be withdrawn) and
// later calls throw. A CommRequest must complete before its communicator is destroyed.
// Traffic (CommStats): only bytes to and from other ranks count; allgatherv sends its bytes to
// size()-1 ranks, broadcast's root sends size()-1 copies, allreduce counts its data once sent and
// once received; barrier and split count no bytes; nothing counts on a single rank.
// Counts are in bytes unless the function says otherwise; buffers are host memory. A communicator
// is used by one thread at a time.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace thdpack {

enum class ReduceOp { kSum, kMax, kMin };

/// What a communicator has done since it was created (its own calls only, not those of
/// communicators split from it).
struct CommStats {
  int64_t collectives = 0;     ///< collective calls started (blocking or not)
  int64_t bytes_sent = 0;      ///< bytes this rank handed to other ranks
  int64_t bytes_received = 0;  ///< bytes this rank received from other ranks

  CommStats& operator+=(const CommStats& o) {
    collectives += o.collectives;
    bytes_sent += o.bytes_sent;
    bytes_received += o.bytes_received;
    return *this;
  }
};

/// A non-blocking operation in flight. wait() completes it (throws CommError on failure); the
/// buffers passed to the operation must stay valid until then. Destroying an unfinished request
/// waits for it.
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  virtual void wait() = 0;
  /// True once complete (never throws; wait() reports errors).
  virtual bool test() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "mpi", "local", ...
  virtual std::string backend() const = 0;

  /// Every rank contributes `send`; rank r's bytes land at recv[offset_r, offset_r + counts[r])
  /// where offset_r = counts[0] + ... + counts[r-1]. counts has size() entries, counts[rank()] ==
  /// send.size(), and recv holds the sum.
  virtual void allgatherv(std::span<const std::byte> send, std::span<std::byte> recv,
                          std::span<const int64_t> counts) = 0;

  /// send_counts[r] bytes of `send` (consecutive, in rank order) go to rank r; recv_counts[r] bytes
  /// come from rank r into `recv` (consecutive, in rank order). Both count arrays have size()
  /// entries and must match pairwise across ranks. The part a rank sends to itself is copied
  /// locally and not counted as traffic.
  virtual void alltoallv(std::span<const std::byte> send, std::span<const int64_t> send_counts,
                         std::span<std::byte> recv, std::span<const int64_t> recv_counts) = 0;

  /// Non-blocking alltoallv with the same contract.
  virtual std::unique_ptr<CommRequest> ialltoallv(std::span<const std::byte> send,
                                                  std::span<const int64_t> send_counts,
                                                  std::span<std::byte> recv,
                                                  std::span<const int64_t> recv_counts) = 0;

  /// `data` of root is copied into `data` of every rank; all ranks pass the same size.
  virtual void broadcast(std::span<std::byte> data, int root) = 0;

  /// Element-wise reduction across ranks, in place.
  virtual void allreduce(std::span<int64_t> data, ReduceOp op) = 0;
  virtual void allreduce(std::span<double> data, ReduceOp op) = 0;

  /// Ranks with the same color (>= 0) form a new communicator, ordered by (key, old rank); every
  /// rank gets one. Collective over this communicator; destroy split communicators in the same
  /// order on every rank.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  /// Blocks until every rank has arrived.
  virtual void barrier() = 0;

  /// Whether collectives may be issued from a thread other than the one that created this
  /// communicator (one thread at a time, never concurrently). MPI: only when MPI was initialised
  /// with MPI_THREAD_SERIALIZED or higher.
  virtual bool allows_other_threads() const { return true; }

  const CommStats& stats() const { return stats_; }

 protected:
  CommStats stats_;
};

// ---- Typed helpers over the byte interface (same collective-order contract). ----

/// Every rank's `values` concatenated in rank order; one allgather of the counts, one of the data.
template <typename T>
std::vector<T> allgather_vector(Communicator& comm, std::span<const T> values) {
  static_assert(std::is_trivially_copyable_v<T>, "collectives move raw bytes");
  std::vector<int64_t> counts(static_cast<size_t>(comm.size()), 0);
  counts[static_cast<size_t>(comm.rank())] = static_cast<int64_t>(values.size());
  comm.allreduce(counts, ReduceOp::kSum);
  int64_t total = 0;
  for (auto& c : counts) {
    total += c;
    c *= static_cast<int64_t>(sizeof(T));
  }
  std::vector<T> out(static_cast<size_t>(total));
  comm.allgatherv(std::as_bytes(values), std::as_writable_bytes(std::span<T>(out)), counts);
  return out;
}

/// Every rank's text, in rank order: what ranks compare to agree (their options, their errors).
/// Two collectives (the lengths, then the bytes), as allgather_vector.
inline std::vector<std::string> allgather_strings(Communicator& comm, std::string_view text) {
  std::vector<int64_t> counts(static_cast<size_t>(comm.size()), 0);
  counts[static_cast<size_t>(comm.rank())] = static_cast<int64_t>(text.size());
  comm.allreduce(counts, ReduceOp::kSum);
  int64_t total = 0;
  for (const int64_t c : counts) total += c;
  std::vector<char> all(static_cast<size_t>(total));
  comm.allgatherv(std::as_bytes(std::span<const char>(text.data(), text.size())),
                  std::as_writable_bytes(std::span<char>(all)), counts);
  std::vector<std::string> out;
  out.reserve(counts.size());
  size_t at = 0;
  for (const int64_t c : counts) {
    out.emplace_back(all.data() + at, static_cast<size_t>(c));
    at += static_cast<size_t>(c);
  }
  return out;
}

/// One value from every rank, in rank order.
template <typename T>
std::vector<T> allgather_value(Communicator& comm, const T& value) {
  static_assert(std::is_trivially_copyable_v<T>, "collectives move raw bytes");
  std::vector<T> out(static_cast<size_t>(comm.size()));
  std::vector<int64_t> counts(static_cast<size_t>(comm.size()), static_cast<int64_t>(sizeof(T)));
  comm.allgatherv(std::as_bytes(std::span<const T>(&value, 1)),
                  std::as_writable_bytes(std::span<T>(out)), counts);
  return out;
}

/// Root's vector on every rank (one broadcast of the size, one of the data).
template <typename T>
void broadcast_vector(Communicator& comm, std::vector<T>& values, int root) {
  static_assert(std::is_trivially_copyable_v<T>, "collectives move raw bytes");
  int64_t n = static_cast<int64_t>(values.size());
  comm.broadcast(std::as_writable_bytes(std::span<int64_t>(&n, 1)), root);
  values.resize(static_cast<size_t>(n));
  comm.broadcast(std::as_writable_bytes(std::span<T>(values)), root);
}

}  // namespace thdpack
