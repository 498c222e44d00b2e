#include "thdpack/comm/local_communicator.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

class LocalGroup;

// State shared by every group of one local world: the failure flag and the groups to wake.
struct LocalWorld {
  LocalOptions options;
  std::mutex mutex;
  bool aborted = false;
  std::vector<std::weak_ptr<LocalGroup>> groups;

  void abort();
};

// What a rank posts for the collective in progress.
struct Slot {
  const std::byte* send = nullptr;
  const int64_t* counts = nullptr;
  std::byte* recv = nullptr;
  int64_t size = 0;
  int color = 0;
  int key = 0;
  std::shared_ptr<LocalGroup> created;
};

// The ranks of one communicator and their rendezvous.
class LocalGroup {
 public:
  LocalGroup(std::shared_ptr<LocalWorld> world, int size)
      : world_(std::move(world)), size_(size), slots_(static_cast<size_t>(size)) {}

  int size() const { return size_; }
  Slot& slot(int rank) { return slots_[static_cast<size_t>(rank)]; }
  const std::shared_ptr<LocalWorld>& world() const { return world_; }

  // Returns once every rank of the group has called sync() for this round.
  void sync(const char* op) {
    std::unique_lock lock(mutex_);
    check_aborted(op);
    const uint64_t round = round_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
      return;
    }
    const double timeout = world_->options.timeout_seconds;
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(timeout > 0 ? timeout : 1e9));
    while (round_ == round) {
      check_aborted(op);
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && round_ == round) {
        fail<CommError>(op, " did not complete within ", std::to_string(timeout),
                        " s: a rank skipped the collective or is stuck");
      }
    }
  }

  void wake() {
    std::lock_guard lock(mutex_);
    cv_.notify_all();
  }

 private:
  void check_aborted(const char* op) const {
    // world_->aborted is only ever set to true; reading it under our own mutex is ordered by the
    // notify in LocalWorld::abort, which takes this mutex.
    std::lock_guard world_lock(world_->mutex);
    if (world_->aborted) throw CommError(std::string(op) + ": a peer rank failed");
  }

  std::shared_ptr<LocalWorld> world_;
  int size_;
  std::vector<Slot> slots_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t round_ = 0;
};

void LocalWorld::abort() {
  std::vector<std::shared_ptr<LocalGroup>> live;
  {
    std::lock_guard lock(mutex);
    aborted = true;
    for (auto& g : groups) {
      if (auto p = g.lock()) live.push_back(std::move(p));
    }
  }
  for (auto& g : live) g->wake();
}

std::shared_ptr<LocalGroup> new_group(const std::shared_ptr<LocalWorld>& world, int size) {
  auto group = std::make_shared<LocalGroup>(world, size);
  std::lock_guard lock(world->mutex);
  world->groups.push_back(group);
  return group;
}

void require(bool ok, const char* op, const std::string& what) {
  if (!ok) throw CommError(std::string(op) + ": " + what);
}

int64_t sum_of(std::span<const int64_t> counts, const char* op) {
  int64_t total = 0;
  for (int64_t c : counts) {
    require(c >= 0, op, "negative count");
    total += c;
  }
  return total;
}

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup> group, int rank)
      : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  std::string backend() const override { return "local"; }

  void allgatherv(std::span<const std::byte> send, std::span<std::byte> recv,
                  std::span<const int64_t> counts) override {
    const char* op = "allgatherv";
    require(static_cast<int>(counts.size()) == size(), op, "counts must have one entry per rank");
    require(sum_of(counts, op) == static_cast<int64_t>(recv.size()), op,
            "recv size differs from the sum of counts");
    require(counts[static_cast<size_t>(rank_)] == static_cast<int64_t>(send.size()), op,
            "send size differs from this rank's count");
    begin(op);
    mine().send = send.data();
    mine().size = static_cast<int64_t>(send.size());
    group_->sync(op);
    int64_t offset = 0;
    for (int r = 0; r < size(); ++r) {
      const int64_t n = counts[static_cast<size_t>(r)];
      if (n != group_->slot(r).size) {
        // As in alltoallv: reported on this rank (a peer whose counts agree goes on).
        fail<CommError>("allgatherv: rank ", r, " sends ", group_->slot(r).size, " bytes, rank ",
                        rank_, " expects ", n);
      }
      if (n > 0) std::memcpy(recv.data() + offset, group_->slot(r).send, static_cast<size_t>(n));
      if (r != rank_) stats_.bytes_received += n;
      offset += n;
    }
    stats_.bytes_sent += static_cast<int64_t>(send.size()) * (size() - 1);
    group_->sync(op);
  }

  void alltoallv(std::span<const std::byte> send, std::span<const int64_t> send_counts,
                 std::span<std::byte> recv, std::span<const int64_t> recv_counts) override {
    const char* op = "alltoallv";
    require(static_cast<int>(send_counts.size()) == size() &&
                static_cast<int>(recv_counts.size()) == size(),
            op, "counts must have one entry per rank");
    require(sum_of(send_counts, op) == static_cast<int64_t>(send.size()), op,
            "send size differs from the sum of send counts");
    require(sum_of(recv_counts, op) == static_cast<int64_t>(recv.size()), op,
            "recv size differs from the sum of recv counts");
    begin(op);
    mine().send = send.data();
    mine().counts = send_counts.data();
    group_->sync(op);
    int64_t at = 0;
    for (int s = 0; s < size(); ++s) {
      const Slot& peer = group_->slot(s);
      int64_t from = 0;
      for (int r = 0; r < rank_; ++r) from += peer.counts[r];
      const int64_t n = peer.counts[rank_];
      if (n != recv_counts[static_cast<size_t>(s)]) {
        // Unblock the peers' second rendezvous before failing would race; report on this rank.
        fail<CommError>("alltoallv: rank ", s, " sends ", n, " bytes to rank ", rank_,
                        ", which expects ", recv_counts[static_cast<size_t>(s)]);
      }
      if (n > 0) std::memcpy(recv.data() + at, peer.send + from, static_cast<size_t>(n));
      if (s != rank_) {
        stats_.bytes_received += n;
        stats_.bytes_sent += send_counts[static_cast<size_t>(s)];
      }
      at += n;
    }
    group_->sync(op);
  }

  std::unique_ptr<CommRequest> ialltoallv(std::span<const std::byte> send,
                                          std::span<const int64_t> send_counts,
                                          std::span<std::byte> recv,
                                          std::span<const int64_t> recv_counts) override {
    // Every rank reaches this call in the same collective order, so completing it now is a valid
    // (if unoverlapped) schedule.
    alltoallv(send, send_counts, recv, recv_counts);
    struct Done final : CommRequest {
      void wait() override {}
      bool test() override { return true; }
    };
    return std::make_unique<Done>();
  }

  void broadcast(std::span<std::byte> data, int root) override {
    const char* op = "broadcast";
    require(root >= 0 && root < size(), op, message("root ", root, " out of range"));
    begin(op);
    mine().recv = data.data();
    mine().size = static_cast<int64_t>(data.size());
    group_->sync(op);
    const Slot& from = group_->slot(root);
    if (rank_ != root) {
      require(from.size == static_cast<int64_t>(data.size()), op,
              message("size differs from the root's (", from.size, " bytes)"));
      if (!data.empty()) std::memcpy(data.data(), from.recv, data.size());
      stats_.bytes_received += static_cast<int64_t>(data.size());
    } else {
      stats_.bytes_sent += static_cast<int64_t>(data.size()) * (size() - 1);
    }
    group_->sync(op);
  }

  void allreduce(std::span<int64_t> data, ReduceOp op) override { reduce(data, op); }
  void allreduce(std::span<double> data, ReduceOp op) override { reduce(data, op); }

  std::unique_ptr<Communicator> split(int color, int key) override {
    const char* op = "split";
    begin(op);
    mine().color = color;
    mine().key = key;
    group_->sync(op);
    // Members of my color ordered by (key, old rank); the first of them creates the group.
    std::vector<std::pair<int, int>> members;
    for (int r = 0; r < size(); ++r) {
      if (group_->slot(r).color == color) members.push_back({group_->slot(r).key, r});
    }
    std::sort(members.begin(), members.end());
    const int leader = std::min_element(members.begin(), members.end(), [](auto a, auto b) {
                         return a.second < b.second;
                       })->second;
    if (leader == rank_) {
      mine().created = new_group(group_->world(), static_cast<int>(members.size()));
    }
    group_->sync(op);
    auto group = group_->slot(leader).created;
    const auto me =
        std::find_if(members.begin(), members.end(), [this](auto m) { return m.second == rank_; });
    group_->sync(op);
    mine().created.reset();
    return std::make_unique<LocalCommunicator>(std::move(group),
                                               static_cast<int>(me - members.begin()));
  }

  void barrier() override {
    begin("barrier");
    group_->sync("barrier");
  }

 private:
  Slot& mine() { return group_->slot(rank_); }
  void begin(const char*) { ++stats_.collectives; }

  // Every rank combines all contributions in rank order, so all get bit-identical results (also
  // for floating-point sums).
  template <typename T>
  void reduce(std::span<T> data, ReduceOp op) {
    const char* name = "allreduce";
    begin(name);
    mine().recv = reinterpret_cast<std::byte*>(data.data());
    mine().size = static_cast<int64_t>(data.size());
    group_->sync(name);
    std::vector<T> result(data.size());
    for (int r = 0; r < size(); ++r) {
      const Slot& peer = group_->slot(r);
      require(peer.size == static_cast<int64_t>(data.size()), name,
              "ranks passed different element counts");
      const T* values = reinterpret_cast<const T*>(peer.recv);
      for (size_t i = 0; i < result.size(); ++i) {
        if (r == 0) {
          result[i] = values[i];
        } else if (op == ReduceOp::kSum) {
          result[i] += values[i];
        } else if (op == ReduceOp::kMax) {
          result[i] = std::max(result[i], values[i]);
        } else {
          result[i] = std::min(result[i], values[i]);
        }
      }
    }
    if (size() > 1) {
      const auto bytes = static_cast<int64_t>(data.size() * sizeof(T));
      stats_.bytes_sent += bytes;
      stats_.bytes_received += bytes;
    }
    group_->sync(name);
    std::copy(result.begin(), result.end(), data.begin());
  }

  std::shared_ptr<LocalGroup> group_;
  int rank_;
};

// A new world of `size` ranks and the communicators of its first group.
std::pair<std::shared_ptr<LocalWorld>, std::vector<std::unique_ptr<Communicator>>> create_world(
    int size, const LocalOptions& options) {
  if (size < 1) throw InvalidArgument("a local world needs at least one rank");
  auto world = std::make_shared<LocalWorld>();
  world->options = options;
  auto group = new_group(world, size);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < size; ++r) comms.push_back(std::make_unique<LocalCommunicator>(group, r));
  return {std::move(world), std::move(comms)};
}

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_local_world(int size, const LocalOptions& options) {
  return create_world(size, options).second;
}

void run_local(int size, const std::function<void(Communicator&)>& fn,
               const LocalOptions& options) {
  // Named, not a structured binding: lambdas cannot capture those before clang 16.
  auto created = create_world(size, options);
  const std::shared_ptr<LocalWorld>& world = created.first;
  const std::vector<std::unique_ptr<Communicator>>& comms = created.second;
  std::mutex error_mutex;
  std::exception_ptr first_error;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(*comms[static_cast<size_t>(r)]);
      } catch (...) {
        {
          std::lock_guard lock(error_mutex);
          if (!first_error) first_error = std::current_exception();
        }
        world->abort();  // peers blocked in collectives fail instead of hanging
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace thdpack
