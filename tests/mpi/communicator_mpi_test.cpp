// Multi-rank tests of MpiCommunicator, run under mpirun at several sizes. Every rank checks the
// exact bytes it received against the formula that produced them, so a wrong offset, root, chunk
// or rank order fails the test; failures on any rank fail the test on rank 0 as well.

#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/mman.h>

#include <array>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "expect_throw.hpp"
#include "mpi_test_main.hpp"
#include "thdpack/comm/communicator.hpp"
#include "thdpack/comm/mpi_communicator.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack {

/// Lowers the largest count one MPI call gets, so that small buffers take the chunked paths.
class MpiCommunicatorTestPeer {
 public:
  static void set_max_mpi_count(MpiCommunicator& comm, int64_t count) {
    comm.max_mpi_count_ = count;
  }
};

namespace {

using Clock = std::chrono::steady_clock;
using test_util::expect_throw_with;

/// Long enough never to fire in a healthy run; short enough that a broken test fails, not hangs.
constexpr double kTestTimeoutSeconds = 60.0;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// The byte that rank `from` puts at position i of what it sends to rank `to`.
std::byte pattern(int from, int to, int64_t i) {
  return static_cast<std::byte>((from * 131 + to * 29 + i * 7 + 11) & 0xff);
}

std::vector<std::byte> pattern_bytes(int from, int to, int64_t n) {
  std::vector<std::byte> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = pattern(from, to, i);
  return out;
}

/// Bytes rank r contributes to an allgatherv: every third rank (1, 4, 7, ...) none.
int64_t gather_count(int r, int64_t base) {
  return r % 3 == 1 ? 0 : base + 3 * r;
}

/// counts[from * size + to]: the bytes rank `from` sends rank `to`. About a third are zero, the
/// diagonal (the self part) included. The same on every rank for a given seed.
std::vector<int64_t> random_counts(int size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> counts(static_cast<size_t>(size) * static_cast<size_t>(size));
  for (int64_t& c : counts) c = rng() % 3 == 0 ? 0 : static_cast<int64_t>(1 + rng() % 40);
  return counts;
}

/// One rank's side of an alltoallv given the whole count matrix, with what it must receive.
struct Exchange {
  std::vector<int64_t> send_counts;
  std::vector<int64_t> recv_counts;
  std::vector<std::byte> send;
  std::vector<std::byte> recv;
  std::vector<std::byte> expected;
  int64_t bytes_to_others = 0;
  int64_t bytes_from_others = 0;
};

Exchange make_exchange(const std::vector<int64_t>& counts, int rank, int size) {
  Exchange x;
  const auto n = static_cast<size_t>(size);
  for (int peer = 0; peer < size; ++peer) {
    const int64_t out = counts[static_cast<size_t>(rank) * n + static_cast<size_t>(peer)];
    const int64_t in = counts[static_cast<size_t>(peer) * n + static_cast<size_t>(rank)];
    x.send_counts.push_back(out);
    x.recv_counts.push_back(in);
    const std::vector<std::byte> sent = pattern_bytes(rank, peer, out);
    const std::vector<std::byte> received = pattern_bytes(peer, rank, in);
    x.send.insert(x.send.end(), sent.begin(), sent.end());
    x.expected.insert(x.expected.end(), received.begin(), received.end());
    if (peer != rank) {
      x.bytes_to_others += out;
      x.bytes_from_others += in;
    }
  }
  x.recv.assign(x.expected.size(), std::byte{0xEE});
  return x;
}

Exchange random_exchange(uint64_t seed, int rank, int size) {
  return make_exchange(random_counts(size, seed), rank, size);
}

template <typename T>
T reduce_reference(ReduceOp op, int size, T (*value)(int rank, int i), int i) {
  T out = value(0, i);
  for (int r = 1; r < size; ++r) {
    const T v = value(r, i);
    out = op == ReduceOp::kSum   ? out + v
          : op == ReduceOp::kMax ? std::max(out, v)
                                 : std::min(out, v);
  }
  return out;
}

/// Beyond int32 and of both signs, so that a reduction in a narrower type or the wrong op shows.
int64_t int_value(int rank, int i) {
  return (int64_t{rank} + 1) * (i + 1) * (i % 2 == 0 ? 1 : -1) + (int64_t{1} << 40) * (i % 3);
}

/// Multiples of 1/4 small enough that every sum is exact in any order.
double double_value(int rank, int i) {
  return 0.5 * (rank + 1) * (i - 3) + 0.25 * i;
}

class MpiCommTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    world_ = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD,
                                               MpiOptions{.timeout_seconds = kTestTimeoutSeconds});
  }

  // A failure on any rank fails the test on rank 0 too, so rank 0's report names it.
  void TearDown() override {
    world_.reset();
    const int mine = HasFailure() ? 1 : 0;
    std::vector<int> failed(static_cast<size_t>(size_), 0);
    MPI_Allgather(&mine, 1, MPI_INT, failed.data(), 1, MPI_INT, MPI_COMM_WORLD);
    if (rank_ != 0) return;
    std::string ranks;
    for (int r = 1; r < size_; ++r) {
      if (failed[static_cast<size_t>(r)] == 0) continue;
      ranks += ' ';
      ranks += std::to_string(r);
    }
    if (!ranks.empty())
      ADD_FAILURE() << "failed on rank(s)" << ranks << " (see their [rank N] lines)";
  }

  MpiCommunicator& world() { return *world_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  /// allgatherv with gather_count(r, base) bytes from rank r; checks contents and stats.
  void check_allgatherv(Communicator& comm, int64_t base) {
    const CommStats before = comm.stats();
    std::vector<int64_t> counts;
    std::vector<std::byte> expected;
    for (int r = 0; r < comm.size(); ++r) {
      counts.push_back(gather_count(r, base));
      const std::vector<std::byte> part = pattern_bytes(r, 0, counts.back());
      expected.insert(expected.end(), part.begin(), part.end());
    }
    const int64_t mine = counts[static_cast<size_t>(comm.rank())];
    const std::vector<std::byte> send = pattern_bytes(comm.rank(), 0, mine);
    std::vector<std::byte> recv(expected.size(), std::byte{0xEE});
    comm.allgatherv(send, recv, counts);
    EXPECT_EQ(recv, expected);
    EXPECT_EQ(comm.stats().collectives - before.collectives, 1);
    EXPECT_EQ(comm.stats().bytes_sent - before.bytes_sent, mine * (comm.size() - 1));
    EXPECT_EQ(comm.stats().bytes_received - before.bytes_received,
              static_cast<int64_t>(expected.size()) - mine);
  }

  /// A broadcast of 5 + 3 * root bytes (+ extra) from every root; checks contents and stats.
  void check_broadcast_from_every_root(Communicator& comm, int64_t extra) {
    const CommStats before = comm.stats();
    int64_t sent = 0;
    int64_t received = 0;
    for (int root = 0; root < comm.size(); ++root) {
      const int64_t n = 5 + 3 * root + extra;
      std::vector<std::byte> data =
          comm.rank() == root ? pattern_bytes(root, 0, n)
                              : std::vector<std::byte>(static_cast<size_t>(n), std::byte{0xEE});
      comm.broadcast(data, root);
      EXPECT_EQ(data, pattern_bytes(root, 0, n)) << "root " << root;
      if (comm.rank() == root) {
        sent += n * (comm.size() - 1);
      } else {
        received += n;
      }
    }
    EXPECT_EQ(comm.stats().collectives - before.collectives, comm.size());
    EXPECT_EQ(comm.stats().bytes_sent - before.bytes_sent, sent);
    EXPECT_EQ(comm.stats().bytes_received - before.bytes_received, received);
  }

  /// Sum, max and min over `n` int64 and `n` double values per rank; checks results and stats.
  void check_allreduce(Communicator& comm, int n) {
    const CommStats before = comm.stats();
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
      std::vector<int64_t> ints;
      std::vector<int64_t> expected_ints;
      std::vector<double> doubles;
      std::vector<double> expected_doubles;
      for (int i = 0; i < n; ++i) {
        ints.push_back(int_value(comm.rank(), i));
        expected_ints.push_back(reduce_reference<int64_t>(op, comm.size(), int_value, i));
        doubles.push_back(double_value(comm.rank(), i));
        expected_doubles.push_back(reduce_reference<double>(op, comm.size(), double_value, i));
      }
      comm.allreduce(ints, op);
      comm.allreduce(doubles, op);
      EXPECT_EQ(ints, expected_ints) << "op " << static_cast<int>(op);
      EXPECT_EQ(doubles, expected_doubles) << "op " << static_cast<int>(op);
    }
    const int64_t bytes = comm.size() > 1 ? 3 * n * int64_t{sizeof(int64_t) + sizeof(double)} : 0;
    EXPECT_EQ(comm.stats().collectives - before.collectives, 6);
    EXPECT_EQ(comm.stats().bytes_sent - before.bytes_sent, bytes);
    EXPECT_EQ(comm.stats().bytes_received - before.bytes_received, bytes);
  }

 private:
  int rank_ = 0;
  int size_ = 1;
  std::unique_ptr<MpiCommunicator> world_;
};

TEST_F(MpiCommTest, ConstructorNeedsInitialisedMpiAndAValidCommunicator) {
  EXPECT_NE(mpi_test::error_before_mpi_init().find("MPI is not initialised"), std::string::npos)
      << "before MPI_Init the constructor threw: \"" << mpi_test::error_before_mpi_init() << "\"";
  expect_throw_with<CommError>([] { MpiCommunicator comm(MPI_COMM_NULL); }, "MPI_COMM_NULL");
  expect_throw_with<InvalidArgument>(
      [] {
        MpiCommunicator comm(
            MPI_COMM_WORLD,
            MpiOptions{.timeout_seconds = std::numeric_limits<double>::quiet_NaN()});
      },
      "timeout_seconds");
  EXPECT_EQ(world().backend(), "mpi");
  EXPECT_EQ(world().rank(), rank());
  EXPECT_EQ(world().size(), size());
  EXPECT_NE(world().handle(), MPI_COMM_WORLD);  // a duplicate, not the caller's communicator
}

TEST_F(MpiCommTest, AllgathervPlacesEveryRanksBytesInRankOrder) {
  check_allgatherv(world(), 4);  // ranks 1, 4, 7 contribute nothing
  std::vector<int64_t> zeros(static_cast<size_t>(size()), 0);
  std::vector<std::byte> nothing;
  world().allgatherv({}, nothing, zeros);
  EXPECT_EQ(world().stats().collectives, 2);
}

TEST_F(MpiCommTest, AlltoallvDeliversRandomCountsIncludingZerosAndTheSelfPart) {
  int64_t sent = 0;
  int64_t received = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    Exchange x = random_exchange(seed, rank(), size());
    world().alltoallv(x.send, x.send_counts, x.recv, x.recv_counts);
    EXPECT_EQ(x.recv, x.expected) << "seed " << seed;
    sent += x.bytes_to_others;
    received += x.bytes_from_others;
  }
  EXPECT_EQ(world().stats().collectives, 6);
  EXPECT_EQ(world().stats().bytes_sent, sent);
  EXPECT_EQ(world().stats().bytes_received, received);
}

TEST_F(MpiCommTest, IalltoallvCompletesThroughWaitTestAndTheDestructor) {
  Exchange a = random_exchange(11, rank(), size());
  Exchange b = random_exchange(12, rank(), size());
  std::unique_ptr<CommRequest> first =
      world().ialltoallv(a.send, a.send_counts, a.recv, a.recv_counts);
  std::unique_ptr<CommRequest> second =
      world().ialltoallv(b.send, b.send_counts, b.recv, b.recv_counts);
  second->wait();  // two exchanges in flight, completed out of order
  first->wait();
  EXPECT_EQ(a.recv, a.expected);
  EXPECT_EQ(b.recv, b.expected);
  EXPECT_TRUE(first->test());
  EXPECT_NO_THROW(first->wait());

  Exchange c = random_exchange(13, rank(), size());
  std::unique_ptr<CommRequest> third =
      world().ialltoallv(c.send, c.send_counts, c.recv, c.recv_counts);
  const Clock::time_point start = Clock::now();
  while (!third->test()) ASSERT_LT(seconds_since(start), kTestTimeoutSeconds);
  EXPECT_NO_THROW(third->wait());
  EXPECT_EQ(c.recv, c.expected);

  Exchange d = random_exchange(14, rank(), size());
  world().ialltoallv(d.send, d.send_counts, d.recv, d.recv_counts).reset();  // destructor waits
  EXPECT_EQ(d.recv, d.expected);

  EXPECT_EQ(world().stats().collectives, 4);
  EXPECT_EQ(world().stats().bytes_sent,
            a.bytes_to_others + b.bytes_to_others + c.bytes_to_others + d.bytes_to_others);
  EXPECT_EQ(world().stats().bytes_received,
            a.bytes_from_others + b.bytes_from_others + c.bytes_from_others + d.bytes_from_others);
}

TEST_F(MpiCommTest, BroadcastFromEveryRoot) {
  check_broadcast_from_every_root(world(), 0);
  std::vector<std::byte> empty;
  world().broadcast(empty, size() - 1);
  EXPECT_TRUE(empty.empty());
}

TEST_F(MpiCommTest, AllreduceSumMaxMinOnInt64AndDouble) {
  check_allreduce(world(), 7);
  world().allreduce(std::span<int64_t>(), ReduceOp::kSum);
  EXPECT_EQ(world().stats().collectives, 7);
}

TEST_F(MpiCommTest, SplitByParityWithReversedKeys) {
  std::unique_ptr<Communicator> group = world().split(rank() % 2, -rank());
  std::vector<int> members;  // old ranks of my group, in their new order
  for (int r = size() - 1; r >= 0; --r) {
    if (r % 2 == rank() % 2) members.push_back(r);
  }
  ASSERT_EQ(group->size(), static_cast<int>(members.size()));
  EXPECT_EQ(members[static_cast<size_t>(group->rank())], rank());
  EXPECT_EQ(group->backend(), "mpi");
  EXPECT_EQ(allgather_value(*group, rank()), members);
  int64_t value = group->rank() == 0 ? 1000 + rank() : -1;
  group->broadcast(std::as_writable_bytes(std::span<int64_t>(&value, 1)), 0);
  EXPECT_EQ(value, 1000 + members.front());

  // Equal keys keep the old order; a split of a split works too.
  std::unique_ptr<Communicator> same = world().split(7, 0);
  EXPECT_EQ(same->rank(), rank());
  EXPECT_EQ(same->size(), size());
  std::unique_ptr<Communicator> alone = group->split(group->rank(), 0);
  EXPECT_EQ(alone->size(), 1);
  EXPECT_EQ(alone->rank(), 0);

  // Each communicator counts only its own calls.
  EXPECT_EQ(world().stats().collectives, 2);
  EXPECT_EQ(group->stats().collectives, 3);
  EXPECT_EQ(same->stats().collectives, 0);
}

TEST_F(MpiCommTest, SplitRejectsANegativeColorOnEveryRank) {
  const int color = rank() == size() - 1 ? -1 : 0;
  expect_throw_with<CommError>(
      [&] { world().split(color, 0); },
      {"split", "rank " + std::to_string(size() - 1) + " passed color -1", "non-negative"});
  world().barrier();  // nothing is left half done
}

TEST_F(MpiCommTest, BarrierWaitsForTheLastRank) {
  if (size() < 2) GTEST_SKIP() << "needs two ranks";
  world().barrier();
  if (rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const Clock::time_point start = Clock::now();
  world().barrier();
  if (rank() != 0) {
    EXPECT_GE(seconds_since(start), 0.1) << "barrier returned before rank 0 arrived";
  }
  EXPECT_EQ(world().stats().collectives, 2);
}

TEST_F(MpiCommTest, StatsCountOnlyBytesToAndFromOtherRanks) {
  // Only the self part: nothing crosses ranks.
  const std::vector<int64_t> zero_matrix(static_cast<size_t>(size() * size()), 0);
  std::vector<int64_t> diagonal = zero_matrix;
  for (int r = 0; r < size(); ++r) diagonal[static_cast<size_t>(r * size() + r)] = 10 + r;
  Exchange x = make_exchange(diagonal, rank(), size());
  world().alltoallv(x.send, x.send_counts, x.recv, x.recv_counts);
  EXPECT_EQ(x.recv, x.expected);
  world().ialltoallv(x.send, x.send_counts, x.recv, x.recv_counts)->wait();
  EXPECT_EQ(world().stats().bytes_sent, 0);
  EXPECT_EQ(world().stats().bytes_received, 0);

  // Self part plus 3 bytes to every other rank.
  std::vector<int64_t> ring = diagonal;
  for (int r = 0; r < size(); ++r) {
    for (int to = 0; to < size(); ++to) {
      if (to != r) ring[static_cast<size_t>(r * size() + to)] = 3;
    }
  }
  Exchange y = make_exchange(ring, rank(), size());
  world().alltoallv(y.send, y.send_counts, y.recv, y.recv_counts);
  EXPECT_EQ(y.recv, y.expected);
  EXPECT_EQ(world().stats().bytes_sent, 3 * (size() - 1));
  EXPECT_EQ(world().stats().bytes_received, 3 * (size() - 1));

  const CommStats before = world().stats();
  world().barrier();
  std::unique_ptr<Communicator> copy = world().split(0, rank());
  copy->barrier();
  EXPECT_EQ(world().stats().collectives, before.collectives + 2);
  EXPECT_EQ(world().stats().bytes_sent, before.bytes_sent);
  EXPECT_EQ(world().stats().bytes_received, before.bytes_received);
  EXPECT_EQ(world().stats().collectives, 5);
  // allgatherv, broadcast and allreduce check their byte counts in their helpers.
  check_allgatherv(*copy, 4);
  check_broadcast_from_every_root(*copy, 0);
  check_allreduce(*copy, 3);
}

TEST_F(MpiCommTest, TypedHelpers) {
  std::vector<int32_t> mine;
  for (int j = 0; j < rank() % 3; ++j) mine.push_back(100 * rank() + j);
  std::vector<int32_t> everyone;
  for (int r = 0; r < size(); ++r) {
    for (int j = 0; j < r % 3; ++j) everyone.push_back(100 * r + j);
  }
  EXPECT_EQ(allgather_vector<int32_t>(world(), mine), everyone);

  struct Pair {
    int32_t rank;
    double half;
  };
  const std::vector<Pair> pairs = allgather_value(world(), Pair{rank(), 0.5 * rank()});
  ASSERT_EQ(pairs.size(), static_cast<size_t>(size()));
  for (int r = 0; r < size(); ++r) {
    EXPECT_EQ(pairs[static_cast<size_t>(r)].rank, r);
    EXPECT_EQ(pairs[static_cast<size_t>(r)].half, 0.5 * r);
  }

  const int root = size() - 1;
  const std::vector<int64_t> roots_values = {5, -4, int64_t{1} << 50, 0, 17};
  std::vector<int64_t> values =
      rank() == root ? roots_values : std::vector<int64_t>(static_cast<size_t>(2 + rank()), -7);
  broadcast_vector(world(), values, root);
  EXPECT_EQ(values, roots_values);
  std::vector<int64_t> emptied = rank() == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{1, 2};
  broadcast_vector(world(), emptied, 0);
  EXPECT_TRUE(emptied.empty());
}

TEST_F(MpiCommTest, BroadcastRootOutOfRangeThrowsOnEveryRank) {
  std::vector<std::byte> data(4);
  for (int root : {size(), -1}) {
    expect_throw_with<CommError>([&] { world().broadcast(data, root); },
                                 {"broadcast", "root " + std::to_string(root), "out of range"});
  }
  // Nothing was posted: the communicator still works and the ranks still agree.
  EXPECT_EQ(world().stats().collectives, 0);
  check_broadcast_from_every_root(world(), 0);
}

TEST_F(MpiCommTest, MismatchedArgumentsThrowNamingTheOperation) {
  Exchange x = random_exchange(21, rank(), size());
  std::vector<std::byte> longer = x.send;
  longer.push_back(std::byte{0});
  expect_throw_with<CommError>(
      [&] { world().alltoallv(longer, x.send_counts, x.recv, x.recv_counts); },
      {"alltoallv", "send has " + std::to_string(longer.size()) + " bytes"});
  std::vector<std::byte> recv_longer(x.recv.size() + 1);
  expect_throw_with<CommError>(
      [&] { world().alltoallv(x.send, x.send_counts, recv_longer, x.recv_counts); },
      {"alltoallv", "recv has"});
  std::vector<int64_t> one_more = x.send_counts;
  one_more.push_back(0);
  expect_throw_with<CommError>(
      [&] { world().ialltoallv(x.send, one_more, x.recv, x.recv_counts); },
      {"ialltoallv", "send_counts has " + std::to_string(size() + 1) + " entries"});
  std::vector<int64_t> self_differs = x.recv_counts;
  self_differs[static_cast<size_t>(rank())] += 1;
  std::vector<std::byte> recv_plus_one(x.recv.size() + 1);
  expect_throw_with<CommError>(
      [&] { world().alltoallv(x.send, x.send_counts, recv_plus_one, self_differs); },
      {"alltoallv", "sends itself"});

  std::vector<int64_t> counts(static_cast<size_t>(size()), 2);
  std::vector<std::byte> send(2);
  std::vector<std::byte> recv(static_cast<size_t>(2 * size()));
  std::vector<std::byte> short_send(1);
  expect_throw_with<CommError>([&] { world().allgatherv(short_send, recv, counts); },
                               {"allgatherv", "counts[" + std::to_string(rank()) + "] is 2"});
  std::vector<std::byte> short_recv(recv.size() - 1);
  expect_throw_with<CommError>([&] { world().allgatherv(send, short_recv, counts); },
                               {"allgatherv", "recv has"});
  std::vector<int64_t> negative = counts;
  negative[0] = -1;
  expect_throw_with<CommError>([&] { world().allgatherv(send, recv, negative); },
                               {"allgatherv", "non-negative"});
  std::vector<int64_t> ints(3);
  expect_throw_with<CommError>([&] { world().allreduce(ints, static_cast<ReduceOp>(42)); },
                               {"allreduce", "ReduceOp"});

  // Nothing was posted, and the communicator still works.
  EXPECT_EQ(world().stats().collectives, 0);
  world().alltoallv(x.send, x.send_counts, x.recv, x.recv_counts);
  EXPECT_EQ(x.recv, x.expected);
}

TEST_F(MpiCommTest, BarrierSkippedByPeersTimesOutAndTheJobRecovers) {
  if (size() < 2) GTEST_SKIP() << "one rank completes a barrier alone";
  // Rank 0 gives up after 1 s; the others' deadline is long, they join only after rank 0 gave up.
  MpiCommunicator comm(MPI_COMM_WORLD,
                       MpiOptions{.timeout_seconds = rank() == 0 ? 1.0 : kTestTimeoutSeconds});
  int64_t timed_out = 0;
  if (rank() == 0) {
    const Clock::time_point start = Clock::now();
    expect_throw_with<CommError>(
        [&] { comm.barrier(); },
        {"barrier did not complete within 1 s on rank 0", "a peer may have died or skipped"});
    const double waited = seconds_since(start);
    EXPECT_GE(waited, 0.95);
    EXPECT_LT(waited, 10.0);
    timed_out = 1;
  }
  world().broadcast(std::as_writable_bytes(std::span<int64_t>(&timed_out, 1)), 0);
  EXPECT_EQ(timed_out, 1);
  // MPI matches collectives by order: the others' barrier pairs with the Ibarrier rank 0 left
  // posted (its MPI progress runs while it waits in world().barrier() below), so all complete.
  if (rank() != 0) {
    EXPECT_NO_THROW(comm.barrier());
  } else {
    expect_throw_with<CommError>([&] { comm.barrier(); },
                                 {"barrier on rank 0", "unusable", "did not complete"});
  }
  world().barrier();
}

TEST_F(MpiCommTest, IalltoallvTimeoutShowsInTestAndWait) {
  if (size() < 2 || size() > 64) GTEST_SKIP() << "needs 2..64 ranks";
  MpiCommunicator comm(MPI_COMM_WORLD,
                       MpiOptions{.timeout_seconds = rank() == 0 ? 0.5 : kTestTimeoutSeconds});
  // Every rank sends one byte to every other rank. MPI cannot cancel rank 0's abandoned exchange
  // and completes it whenever the others arrive, so its buffers must outlive this test.
  static std::array<std::byte, 64> rank0_send;
  static std::array<std::byte, 64> rank0_recv;
  std::vector<int64_t> counts(static_cast<size_t>(size()), 1);
  counts[static_cast<size_t>(rank())] = 0;
  int64_t timed_out = 0;
  if (rank() == 0) {
    for (int to = 1; to < size(); ++to) rank0_send[static_cast<size_t>(to - 1)] = pattern(0, to, 0);
    const auto n = static_cast<size_t>(size() - 1);
    const Clock::time_point start = Clock::now();
    std::unique_ptr<CommRequest> request = comm.ialltoallv(std::span(rank0_send).first(n), counts,
                                                           std::span(rank0_recv).first(n), counts);
    while (!request->test() && seconds_since(start) < 10.0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const double waited = seconds_since(start);
    EXPECT_GE(waited, 0.45);
    EXPECT_LT(waited, 10.0);
    EXPECT_TRUE(request->test());
    expect_throw_with<CommError>([&] { request->wait(); },
                                 "ialltoallv did not complete within 0.5 s on rank 0");
    timed_out = 1;
  }
  world().broadcast(std::as_writable_bytes(std::span<int64_t>(&timed_out, 1)), 0);
  EXPECT_EQ(timed_out, 1);
  if (rank() != 0) {
    std::vector<std::byte> send;
    for (int to = 0; to < size(); ++to) {
      if (to != rank()) send.push_back(pattern(rank(), to, 0));
    }
    std::vector<std::byte> recv(send.size(), std::byte{0xEE});
    EXPECT_NO_THROW(comm.alltoallv(send, counts, recv, counts));
    EXPECT_EQ(recv.front(), pattern(0, rank(), 0)) << "the byte from rank 0's abandoned exchange";
  } else {
    expect_throw_with<CommError>([&] { comm.allreduce(std::span<double>(), ReduceOp::kSum); },
                                 {"allreduce on rank 0", "unusable"});
  }
  world().barrier();
}

TEST_F(MpiCommTest, AlltoallvBeyondIntMaxThrows) {
  if (size() < 2) GTEST_SKIP() << "needs a peer to send to";
  // 2 GiB + 1 of address space that is never touched: the call must refuse before reading it.
  const int64_t big = int64_t{INT_MAX} + 1;
  void* region = mmap(nullptr, static_cast<size_t>(big), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  int64_t mapped = region == MAP_FAILED ? 0 : 1;
  world().allreduce(std::span<int64_t>(&mapped, 1), ReduceOp::kMin);
  if (mapped == 0) {
    if (region != MAP_FAILED) munmap(region, static_cast<size_t>(big));
    GTEST_SKIP() << "cannot reserve 2 GiB of address space";
  }
  const std::span<std::byte> bytes(static_cast<std::byte*>(region), static_cast<size_t>(big));
  // Every rank sends 2 GiB to its successor, so every rank hits the limit and none waits.
  std::vector<int64_t> send_counts(static_cast<size_t>(size()), 0);
  std::vector<int64_t> recv_counts(static_cast<size_t>(size()), 0);
  send_counts[static_cast<size_t>((rank() + 1) % size())] = big;
  recv_counts[static_cast<size_t>((rank() + size() - 1) % size())] = big;
  expect_throw_with<CommError>(
      [&] { world().alltoallv(bytes, send_counts, bytes, recv_counts); },
      {"alltoallv on rank " + std::to_string(rank()), "2147483648 bytes", "exceeds 2147483647"});
  munmap(region, static_cast<size_t>(big));
  world().barrier();
}

TEST_F(MpiCommTest, ChunkedPathsDeliverTheSameBytes) {
  // With at most 7 bytes (allreduce: elements) per MPI call, allgatherv turns into chunked
  // broadcasts and broadcast and allreduce post several chunks each.
  MpiCommunicatorTestPeer::set_max_mpi_count(world(), 7);
  check_allgatherv(world(), 9);
  check_broadcast_from_every_root(world(), 20);
  check_allreduce(world(), 23);
  // alltoallv has no chunked path: a count above the limit throws (on every rank here).
  if (size() > 1) {
    std::vector<int64_t> ring(static_cast<size_t>(size() * size()), 0);
    for (int r = 0; r < size(); ++r) ring[static_cast<size_t>(r * size() + (r + 1) % size())] = 8;
    Exchange x = make_exchange(ring, rank(), size());
    expect_throw_with<CommError>(
        [&] { world().alltoallv(x.send, x.send_counts, x.recv, x.recv_counts); },
        {"alltoallv", "exceeds 7"});
  }
}

TEST_F(MpiCommTest, SingleRankCommunicatorCopiesLocally) {
  MpiCommunicator self(MPI_COMM_SELF, MpiOptions{.timeout_seconds = kTestTimeoutSeconds});
  ASSERT_EQ(self.size(), 1);
  EXPECT_EQ(self.rank(), 0);
  Exchange x = make_exchange({10}, 0, 1);
  self.alltoallv(x.send, x.send_counts, x.recv, x.recv_counts);
  EXPECT_EQ(x.recv, x.expected);
  check_allgatherv(self, 4);
  check_broadcast_from_every_root(self, 0);
  check_allreduce(self, 5);
  EXPECT_EQ(self.stats().collectives, 9);
  EXPECT_EQ(self.stats().bytes_sent, 0);
  EXPECT_EQ(self.stats().bytes_received, 0);
}

}  // namespace
}  // namespace thdpack
