// MpiCommunicator: the MPI backend of Communicator (mpi_communicator.hpp).
//
// Every collective is posted as the non-blocking MPI operation and completed by polling MPI_Test
// against a deadline, because a blocking MPI collective whose peer died or skipped it never
// returns. A collective that timed out or failed inside MPI cannot be cancelled (MPI has no
// cancel for collectives), so it stays posted and the communicator refuses further work: the
// ranks may no longer agree on which collective comes next.
//
// Large messages: MPI counts and displacements are int. broadcast and allreduce post several
// chunks and allgatherv turns into one chunked broadcast per rank when a count or offset exceeds
// INT_MAX; every rank knows those sizes, so every rank takes the same path. alltoallv cannot: a
// rank knows only its own counts, and switching to another MPI collective would need an agreement
// round on every call, so it throws (its peers then time out).

#include "thdpack/comm/mpi_communicator.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

using Clock = std::chrono::steady_clock;

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    return message("MPI error code ", code);
  }
  return std::string(text, static_cast<size_t>(length));
}

std::string seconds_text(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

/// Bad arguments, found before anything was posted: the communicator stays usable.
CommError invalid(const char* op, int rank, const std::string& what) {
  return CommError(message(op, " on rank ", rank, ": ", what));
}

struct PollOutcome {
  bool complete = false;
  int rc = MPI_SUCCESS;
};

// Polls until every request completes, MPI reports an error or the deadline passes. The first
// polls spin (a collective among running ranks finishes in microseconds); after that it sleeps
// between polls, doubling up to kMaxSleep, so that oversubscribed ranks give their core to the
// peers they are waiting for.
PollOutcome poll(std::span<MPI_Request> requests, std::optional<Clock::time_point> deadline) {
  constexpr int kSpinPolls = 100;
  constexpr auto kMaxSleep = std::chrono::microseconds(1000);
  auto sleep = std::chrono::microseconds(1);
  for (int polls = 0;; ++polls) {
    int done = 0;
    const int rc =
        MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return {false, rc};
    if (done) return {true, MPI_SUCCESS};
    if (deadline && Clock::now() >= *deadline) return {false, MPI_SUCCESS};
    if (polls < kSpinPolls) continue;
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, kMaxSleep);
  }
}

/// Checks that `counts` has one non-negative entry per rank and returns their sum.
int64_t checked_total(const char* op, int rank, int size, const char* name,
                      std::span<const int64_t> counts) {
  if (static_cast<int64_t>(counts.size()) != size) {
    throw invalid(op, rank,
                  message(name, " has ", counts.size(), " entries but the communicator has ", size,
                          " ranks; pass one count per rank"));
  }
  int64_t total = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] < 0) {
      throw invalid(op, rank,
                    message(name, "[", r, "] is ", counts[r], "; counts must be non-negative"));
    }
    if (counts[r] > INT64_MAX - total) {
      throw invalid(op, rank, std::string(name) + " sum to more than INT64_MAX bytes");
    }
    total += counts[r];
  }
  return total;
}

void require_span_size(const char* op, int rank, const char* span_name, int64_t span_bytes,
                       const char* counts_name, int64_t total) {
  if (span_bytes != total) {
    throw invalid(op, rank,
                  message(span_name, " has ", span_bytes, " bytes but ", counts_name, " sum to ",
                          total, "; pass a buffer of exactly the summed counts"));
  }
}

/// One side of an alltoallv in MPI's terms: int counts and displacements, with the self part left
/// out (count 0) because it is copied locally. `offsets` are the byte offsets of every rank's part.
struct MpiCounts {
  std::vector<int> counts;
  std::vector<int> displs;
  std::vector<int64_t> offsets;
};

MpiCounts alltoallv_counts(const char* op, int rank, int64_t limit, const char* name,
                           std::span<const int64_t> counts) {
  MpiCounts out;
  out.counts.assign(counts.size(), 0);
  out.displs.assign(counts.size(), 0);
  out.offsets.assign(counts.size(), 0);
  int64_t offset = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    out.offsets[r] = offset;
    if (counts[r] > 0 && static_cast<int>(r) != rank) {
      if (counts[r] > limit || offset > limit) {
        throw invalid(op, rank,
                      message(name, "[", r, "] = ", counts[r], " bytes at offset ", offset,
                              " exceeds ", limit,
                              ", the largest count or displacement MPI takes (MPI counts are int); "
                              "split the exchange into several alltoallv calls (peers that passed "
                              "smaller counts will time out in this one)"));
      }
      out.counts[r] = static_cast<int>(counts[r]);
      out.displs[r] = static_cast<int>(offset);
    }
    offset += counts[r];
  }
  return out;
}

struct AlltoallvPlan {
  MpiCounts send;
  MpiCounts recv;
};

// Validates an alltoallv, copies the self part and returns what MPI needs for the rest.
AlltoallvPlan prepare_alltoallv(const char* op, int rank, int size, int64_t limit,
                                std::span<const std::byte> send,
                                std::span<const int64_t> send_counts, std::span<std::byte> recv,
                                std::span<const int64_t> recv_counts) {
  const int64_t send_total = checked_total(op, rank, size, "send_counts", send_counts);
  const int64_t recv_total = checked_total(op, rank, size, "recv_counts", recv_counts);
  require_span_size(op, rank, "send", static_cast<int64_t>(send.size()), "send_counts", send_total);
  require_span_size(op, rank, "recv", static_cast<int64_t>(recv.size()), "recv_counts", recv_total);
  const auto self = static_cast<size_t>(rank);
  if (send_counts[self] != recv_counts[self]) {
    throw invalid(
        op, rank,
        message("send_counts[", rank, "] is ", send_counts[self], " but recv_counts[", rank,
                "] is ", recv_counts[self],
                "; the part a rank sends itself must equal the part it receives from itself"));
  }
  AlltoallvPlan plan{alltoallv_counts(op, rank, limit, "send_counts", send_counts),
                     alltoallv_counts(op, rank, limit, "recv_counts", recv_counts)};
  if (send_counts[self] > 0) {
    std::memcpy(recv.data() + plan.recv.offsets[self], send.data() + plan.send.offsets[self],
                static_cast<size_t>(send_counts[self]));
  }
  return plan;
}

MPI_Op mpi_op(ReduceOp op, int rank) {
  switch (op) {
    case ReduceOp::kSum:
      return MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
  }
  throw invalid(
      "allreduce", rank,
      message("unknown ReduceOp value ", static_cast<int>(op), "; use kSum, kMax or kMin"));
}

}  // namespace

struct MpiCommunicator::State {
  int rank = 0;
  double timeout_seconds = 0;
  /// The first failure that left an operation posted; non-empty: the communicator is unusable.
  std::string failure;
  /// Requests given up on: MPI cannot cancel a collective, so they stay until they complete.
  std::vector<MPI_Request> abandoned;

  std::optional<Clock::time_point> deadline(Clock::time_point posted) const {
    // Beyond about 30 years the arithmetic could overflow; treat it as forever.
    if (!(timeout_seconds > 0) || timeout_seconds > 1e9) return std::nullopt;
    return posted + std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(timeout_seconds));
  }

  void require_usable(const char* op) const {
    if (failure.empty()) return;
    // Qualified: State::fail (below) hides thdpack::fail.
    thdpack::fail<CommError>(
        op, " on rank ", rank, ": this communicator is unusable after an earlier failure (",
        failure,
        "); MPI cannot cancel a collective in flight, so the ranks may disagree on "
        "which collective comes next: create a new communicator or abort the job");
  }

  std::string mpi_failure(const char* op, const char* mpi_function, int rc) const {
    return message(op, " failed on rank ", rank, ": ", mpi_function, ": ", mpi_error_text(rc));
  }

  std::string timeout_failure(const char* op) const {
    return message(op, " did not complete within ", seconds_text(timeout_seconds), " s on rank ",
                   rank, ": a peer may have died or skipped the collective");
  }

  /// Records the failure and keeps the unfinished requests (they are MPI's until they complete).
  void poison(const std::string& message, std::span<MPI_Request> pending) {
    for (MPI_Request& request : pending) {
      if (request != MPI_REQUEST_NULL) abandoned.push_back(request);
      request = MPI_REQUEST_NULL;
    }
    if (failure.empty()) failure = message;
  }

  [[noreturn]] void fail(const std::string& message, std::span<MPI_Request> pending) {
    poison(message, pending);
    throw CommError(message);
  }

  /// Checks the return code of the call that just posted requests.back().
  void check_post(int rc, const char* op, const char* mpi_function,
                  std::vector<MPI_Request>& requests) {
    if (rc == MPI_SUCCESS) return;
    requests.back() = MPI_REQUEST_NULL;  // not posted; its value is undefined
    fail(mpi_failure(op, mpi_function, rc), requests);
  }

  void complete(const char* op, std::span<MPI_Request> requests, Clock::time_point posted) {
    const PollOutcome outcome = poll(requests, deadline(posted));
    if (outcome.rc != MPI_SUCCESS) fail(mpi_failure(op, "MPI_Testall", outcome.rc), requests);
    if (!outcome.complete) fail(timeout_failure(op), requests);
  }
};

class MpiCommunicator::Request final : public CommRequest {
 public:
  Request(std::shared_ptr<State> state, AlltoallvPlan plan)
      : state_(std::move(state)), plan_(std::move(plan)) {}

  ~Request() override {
    if (finished_) return;
    try {
      wait();
    } catch (...) {  // a destructor must not throw; the failure is recorded in state_
    }
  }

  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  void wait() override {
    if (!finished_) {
      const PollOutcome outcome =
          poll(std::span<MPI_Request>(&request_, 1), state_->deadline(posted_));
      if (outcome.rc != MPI_SUCCESS) {
        finish_with(state_->mpi_failure(kOp, "MPI_Test", outcome.rc));
      } else if (!outcome.complete) {
        finish_with(state_->timeout_failure(kOp));
      } else {
        finished_ = true;
      }
    }
    if (!error_.empty()) throw CommError(error_);
  }

  bool test() override {
    if (finished_) return true;
    int done = 0;
    const int rc = MPI_Test(&request_, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      finish_with(state_->mpi_failure(kOp, "MPI_Test", rc));
    } else if (done) {
      finished_ = true;
    } else if (const auto deadline = state_->deadline(posted_);
               deadline && Clock::now() >= *deadline) {
      finish_with(state_->timeout_failure(kOp));
    }
    return finished_;
  }

  MPI_Request* handle() { return &request_; }
  const AlltoallvPlan& plan() const { return plan_; }
  void set_posted(Clock::time_point posted) { posted_ = posted; }

 private:
  static constexpr const char* kOp = "ialltoallv";

  void finish_with(std::string message) {
    finished_ = true;
    state_->poison(message, std::span<MPI_Request>(&request_, 1));
    error_ = std::move(message);
  }

  std::shared_ptr<State> state_;
  AlltoallvPlan plan_;  // MPI reads the count arrays until the exchange completes
  MPI_Request request_ = MPI_REQUEST_NULL;
  Clock::time_point posted_;
  bool finished_ = false;
  std::string error_;
};

MpiCommunicator::MpiCommunicator(MPI_Comm comm, const MpiOptions& options)
    : MpiCommunicator(comm, options, /*take_ownership=*/false) {}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, const MpiOptions& options, bool take_ownership)
    : options_(options), state_(std::make_shared<State>()) {
  if (!take_ownership) {
    if (std::isnan(options.timeout_seconds)) {
      throw InvalidArgument(
          "MpiCommunicator: timeout_seconds is NaN; give seconds, or <= 0 to wait forever");
    }
    int initialized = 0;
    int finalized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      throw CommError(
          "MpiCommunicator: MPI is not initialised; call MPI_Init or MPI_Init_thread before "
          "creating an MpiCommunicator (thdpack never initialises MPI itself)");
    }
    MPI_Finalized(&finalized);
    if (finalized) {
      throw CommError(
          "MpiCommunicator: MPI is already finalised; create communicators between "
          "MPI_Init and MPI_Finalize");
    }
    if (comm == MPI_COMM_NULL) {
      throw CommError(
          "MpiCommunicator: the communicator is MPI_COMM_NULL; pass a valid one such "
          "as MPI_COMM_WORLD");
    }
    const int rc = MPI_Comm_dup(comm, &comm_);
    if (rc != MPI_SUCCESS) {
      int world_rank = -1;
      MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
      comm_ = MPI_COMM_NULL;
      fail<CommError>("MpiCommunicator: MPI_Comm_dup failed on world rank ", world_rank, ": ",
                      mpi_error_text(rc));
    }
  } else {
    comm_ = comm;
  }
  // This object owns comm_ from here on; free it if the rest of the setup fails.
  const char* failed_call = nullptr;
  int rc = MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  if (rc != MPI_SUCCESS) {
    failed_call = "MPI_Comm_set_errhandler";
  } else if ((rc = MPI_Comm_rank(comm_, &rank_)) != MPI_SUCCESS) {
    failed_call = "MPI_Comm_rank";
  } else if ((rc = MPI_Comm_size(comm_, &size_)) != MPI_SUCCESS) {
    failed_call = "MPI_Comm_size";
  }
  if (failed_call != nullptr) {
    MPI_Comm_free(&comm_);
    throw CommError(std::string("MpiCommunicator: ") + failed_call +
                    " failed: " + mpi_error_text(rc));
  }
  state_->rank = rank_;
  state_->timeout_seconds = options_.timeout_seconds;
}

bool MpiCommunicator::allows_other_threads() const {
  int level = MPI_THREAD_SINGLE;
  return MPI_Query_thread(&level) == MPI_SUCCESS && level >= MPI_THREAD_SERIALIZED;
}

MpiCommunicator::~MpiCommunicator() {
  if (comm_ == MPI_COMM_NULL) return;
  int finalized = 1;
  if (MPI_Finalized(&finalized) != MPI_SUCCESS || finalized) return;  // too late to free anything
  // Release abandoned requests that have completed since; the rest stay MPI's.
  for (MPI_Request& request : state_->abandoned) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
  }
  std::erase(state_->abandoned, MPI_REQUEST_NULL);
  // MPI defers the deallocation until operations still in flight on comm_ complete.
  MPI_Comm_free(&comm_);
}

void MpiCommunicator::allgatherv(std::span<const std::byte> send, std::span<std::byte> recv,
                                 std::span<const int64_t> counts) {
  constexpr const char* kOp = "allgatherv";
  state_->require_usable(kOp);
  const int64_t total = checked_total(kOp, rank_, size_, "counts", counts);
  const auto self = static_cast<size_t>(rank_);
  if (counts[self] != static_cast<int64_t>(send.size())) {
    throw invalid(kOp, rank_,
                  message("counts[", rank_, "] is ", counts[self], " but send has ", send.size(),
                          " bytes; this rank's count must be the size of its send buffer"));
  }
  require_span_size(kOp, rank_, "recv", static_cast<int64_t>(recv.size()), "counts", total);

  std::vector<int64_t> offsets(counts.size(), 0);
  bool fits = true;
  int64_t offset = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    offsets[r] = offset;
    if (counts[r] > 0 && (counts[r] > max_mpi_count_ || offset > max_mpi_count_)) fits = false;
    offset += counts[r];
  }
  // Own bytes go in place locally (MPI_IN_PLACE), which is also what the chunked path needs.
  // memmove: a caller may pass its own slot of recv as send.
  if (!send.empty()) std::memmove(recv.data() + offsets[self], send.data(), send.size());

  stats_.collectives += 1;
  stats_.bytes_sent += static_cast<int64_t>(send.size()) * (size_ - 1);
  stats_.bytes_received += total - static_cast<int64_t>(send.size());

  const Clock::time_point posted = Clock::now();
  std::vector<MPI_Request> requests;
  if (fits) {
    std::vector<int> mpi_counts(counts.size(), 0);
    std::vector<int> mpi_displs(counts.size(), 0);
    for (size_t r = 0; r < counts.size(); ++r) {
      if (counts[r] == 0) continue;
      mpi_counts[r] = static_cast<int>(counts[r]);
      mpi_displs[r] = static_cast<int>(offsets[r]);
    }
    requests.push_back(MPI_REQUEST_NULL);
    state_->check_post(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_BYTE, recv.data(), mpi_counts.data(),
                                       mpi_displs.data(), MPI_BYTE, comm_, &requests.back()),
                       kOp, "MPI_Iallgatherv", requests);
    state_->complete(kOp, requests, posted);
  } else {
    // Too large for MPI's int counts: every rank broadcasts its own part, in chunks. All ranks
    // hold the same counts, so all of them come here and post the same broadcasts.
    for (size_t r = 0; r < counts.size(); ++r) {
      if (counts[r] == 0) continue;
      post_broadcast_chunks(recv.data() + offsets[r], counts[r], static_cast<int>(r), kOp,
                            requests);
    }
    state_->complete(kOp, requests, posted);
  }
}

void MpiCommunicator::alltoallv(std::span<const std::byte> send,
                                std::span<const int64_t> send_counts, std::span<std::byte> recv,
                                std::span<const int64_t> recv_counts) {
  constexpr const char* kOp = "alltoallv";
  state_->require_usable(kOp);
  AlltoallvPlan plan =
      prepare_alltoallv(kOp, rank_, size_, max_mpi_count_, send, send_counts, recv, recv_counts);
  const auto self = static_cast<size_t>(rank_);
  stats_.collectives += 1;
  stats_.bytes_sent += static_cast<int64_t>(send.size()) - send_counts[self];
  stats_.bytes_received += static_cast<int64_t>(recv.size()) - recv_counts[self];

  const Clock::time_point posted = Clock::now();
  std::vector<MPI_Request> requests(1, MPI_REQUEST_NULL);
  state_->check_post(MPI_Ialltoallv(send.data(), plan.send.counts.data(), plan.send.displs.data(),
                                    MPI_BYTE, recv.data(), plan.recv.counts.data(),
                                    plan.recv.displs.data(), MPI_BYTE, comm_, &requests.back()),
                     kOp, "MPI_Ialltoallv", requests);
  state_->complete(kOp, requests, posted);
}

std::unique_ptr<CommRequest> MpiCommunicator::ialltoallv(std::span<const std::byte> send,
                                                         std::span<const int64_t> send_counts,
                                                         std::span<std::byte> recv,
                                                         std::span<const int64_t> recv_counts) {
  constexpr const char* kOp = "ialltoallv";
  state_->require_usable(kOp);
  auto request = std::make_unique<Request>(
      state_,
      prepare_alltoallv(kOp, rank_, size_, max_mpi_count_, send, send_counts, recv, recv_counts));
  const auto self = static_cast<size_t>(rank_);
  stats_.collectives += 1;
  stats_.bytes_sent += static_cast<int64_t>(send.size()) - send_counts[self];
  stats_.bytes_received += static_cast<int64_t>(recv.size()) - recv_counts[self];

  const AlltoallvPlan& plan = request->plan();
  request->set_posted(Clock::now());
  const int rc = MPI_Ialltoallv(send.data(), plan.send.counts.data(), plan.send.displs.data(),
                                MPI_BYTE, recv.data(), plan.recv.counts.data(),
                                plan.recv.displs.data(), MPI_BYTE, comm_, request->handle());
  if (rc != MPI_SUCCESS) {
    *request->handle() = MPI_REQUEST_NULL;  // not posted: the request destructor has nothing to do
    state_->fail(state_->mpi_failure(kOp, "MPI_Ialltoallv", rc), {});
  }
  return request;
}

void MpiCommunicator::post_broadcast_chunks(std::byte* data, int64_t bytes, int root,
                                            const char* op, std::vector<MPI_Request>& requests) {
  int64_t offset = 0;
  do {  // at least one call, so an empty broadcast still meets its peers
    const int64_t chunk = std::min(bytes - offset, max_mpi_count_);
    requests.push_back(MPI_REQUEST_NULL);
    state_->check_post(
        MPI_Ibcast(data + offset, static_cast<int>(chunk), MPI_BYTE, root, comm_, &requests.back()),
        op, "MPI_Ibcast", requests);
    offset += chunk;
  } while (offset < bytes);
}

void MpiCommunicator::broadcast(std::span<std::byte> data, int root) {
  constexpr const char* kOp = "broadcast";
  state_->require_usable(kOp);
  if (root < 0 || root >= size_) {
    throw invalid(kOp, rank_,
                  message("root ", root, " is out of range for a communicator of ", size_,
                          " ranks (roots are 0..", size_ - 1, ")"));
  }
  const auto bytes = static_cast<int64_t>(data.size());
  stats_.collectives += 1;
  if (rank_ == root) {
    stats_.bytes_sent += bytes * (size_ - 1);
  } else {
    stats_.bytes_received += bytes;
  }
  const Clock::time_point posted = Clock::now();
  std::vector<MPI_Request> requests;
  post_broadcast_chunks(data.data(), bytes, root, kOp, requests);
  state_->complete(kOp, requests, posted);
}

void MpiCommunicator::allreduce_bytes(void* data, int64_t count, int64_t element_bytes,
                                      MPI_Datatype type, ReduceOp op) {
  constexpr const char* kOp = "allreduce";
  state_->require_usable(kOp);
  const MPI_Op mpi_reduce = mpi_op(op, rank_);
  stats_.collectives += 1;
  if (size_ > 1) {  // counted as if the data went out and came back once
    stats_.bytes_sent += count * element_bytes;
    stats_.bytes_received += count * element_bytes;
  }
  const Clock::time_point posted = Clock::now();
  std::vector<MPI_Request> requests;
  auto* bytes = static_cast<std::byte*>(data);
  int64_t offset = 0;
  do {  // chunks of at most max_mpi_count_ elements; at least one call
    const int64_t chunk = std::min(count - offset, max_mpi_count_);
    requests.push_back(MPI_REQUEST_NULL);
    state_->check_post(
        MPI_Iallreduce(MPI_IN_PLACE, bytes + offset * element_bytes, static_cast<int>(chunk), type,
                       mpi_reduce, comm_, &requests.back()),
        kOp, "MPI_Iallreduce", requests);
    offset += chunk;
  } while (offset < count);
  state_->complete(kOp, requests, posted);
}

void MpiCommunicator::allreduce(std::span<int64_t> data, ReduceOp op) {
  allreduce_bytes(data.data(), static_cast<int64_t>(data.size()), sizeof(int64_t), MPI_INT64_T, op);
}

void MpiCommunicator::allreduce(std::span<double> data, ReduceOp op) {
  allreduce_bytes(data.data(), static_cast<int64_t>(data.size()), sizeof(double), MPI_DOUBLE, op);
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  constexpr const char* kOp = "split";
  state_->require_usable(kOp);
  stats_.collectives += 1;
  // MPI_Comm_split has no non-blocking form. Exchanging (color, key) first, under the deadline,
  // turns a rank that skipped the split into a timeout instead of a hang, and lets every rank
  // reject a bad color alike.
  const int mine[2] = {color, key};
  std::vector<int> all(static_cast<size_t>(2 * size_), 0);
  const Clock::time_point posted = Clock::now();
  std::vector<MPI_Request> requests(1, MPI_REQUEST_NULL);
  state_->check_post(
      MPI_Iallgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, comm_, &requests.back()), kOp,
      "MPI_Iallgather", requests);
  state_->complete(kOp, requests, posted);
  for (int r = 0; r < size_; ++r) {
    const int c = all[static_cast<size_t>(2 * r)];
    if (c < 0) {
      throw invalid(kOp, rank_,
                    message("rank ", r, " passed color ", c, "; colors must be non-negative"));
    }
  }
  MPI_Comm out = MPI_COMM_NULL;
  const int rc = MPI_Comm_split(comm_, color, key, &out);
  if (rc != MPI_SUCCESS) state_->fail(state_->mpi_failure(kOp, "MPI_Comm_split", rc), {});
  return std::unique_ptr<Communicator>(new MpiCommunicator(out, options_, true));
}

void MpiCommunicator::barrier() {
  constexpr const char* kOp = "barrier";
  state_->require_usable(kOp);
  stats_.collectives += 1;
  const Clock::time_point posted = Clock::now();
  std::vector<MPI_Request> requests(1, MPI_REQUEST_NULL);
  state_->check_post(MPI_Ibarrier(comm_, &requests.back()), kOp, "MPI_Ibarrier", requests);
  state_->complete(kOp, requests, posted);
}

}  // namespace thdpack
