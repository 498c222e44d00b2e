// The local-thread communicator: collectives, split, stats, and failures that do not hang.

#include <gtest/gtest.h>

#include <atomic>
#include <numeric>

#include "expect_throw.hpp"
#include "thdpack/comm/local_communicator.hpp"
#include "thdpack/comm/process_groups.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

TEST(LocalCommunicator, AllgathervWithUnevenCounts) {
  run_local(4, [](Communicator& c) {
    // Rank r contributes r bytes of value r.
    std::vector<std::byte> mine(static_cast<size_t>(c.rank()), std::byte(c.rank()));
    std::vector<int64_t> counts = {0, 1, 2, 3};
    std::vector<std::byte> all(6);
    c.allgatherv(mine, all, counts);
    const std::vector<std::byte> want = {std::byte(1), std::byte(2), std::byte(2),
                                         std::byte(3), std::byte(3), std::byte(3)};
    EXPECT_EQ(all, want);
    EXPECT_EQ(c.stats().collectives, 1);
    EXPECT_EQ(c.stats().bytes_sent, c.rank() * 3);
  });
}

TEST(LocalCommunicator, AlltoallvMovesEachBlockToItsRank) {
  run_local(3, [](Communicator& c) {
    // Rank s sends (s + 1) bytes of value 10*s + r to rank r.
    const int s = c.rank();
    std::vector<std::byte> send;
    std::vector<int64_t> send_counts, recv_counts;
    for (int r = 0; r < 3; ++r) {
      send_counts.push_back(s + 1);
      recv_counts.push_back(r + 1);
      for (int i = 0; i <= s; ++i) send.push_back(std::byte(10 * s + r));
    }
    std::vector<std::byte> recv(6);
    c.alltoallv(send, send_counts, recv, recv_counts);
    std::vector<std::byte> want;
    for (int from = 0; from < 3; ++from) {
      for (int i = 0; i <= from; ++i) want.push_back(std::byte(10 * from + s));
    }
    EXPECT_EQ(recv, want);
    // The part for itself is not traffic.
    EXPECT_EQ(c.stats().bytes_sent, 2 * (s + 1));
  });
}

TEST(LocalCommunicator, BroadcastAllreduceSplit) {
  run_local(6, [](Communicator& c) {
    std::vector<int64_t> v = {c.rank(), 1};
    c.allreduce(v, ReduceOp::kSum);
    EXPECT_EQ(v, (std::vector<int64_t>{15, 6}));
    std::vector<double> m = {static_cast<double>(c.rank())};
    c.allreduce(m, ReduceOp::kMax);
    EXPECT_EQ(m[0], 5.0);
    c.allreduce(m, ReduceOp::kMin);
    EXPECT_EQ(m[0], 5.0);
    std::vector<std::byte> data(3, std::byte(c.rank() == 4 ? 42 : 0));
    c.broadcast(data, 4);
    EXPECT_EQ(data, std::vector<std::byte>(3, std::byte(42)));
    // Even and odd ranks, ordered by descending old rank.
    auto half = c.split(c.rank() % 2, -c.rank());
    EXPECT_EQ(half->size(), 3);
    EXPECT_EQ(half->rank(), 2 - c.rank() / 2);
    std::vector<int64_t> who = {c.rank()};
    half->allreduce(who, ReduceOp::kSum);
    EXPECT_EQ(who[0], c.rank() % 2 ? 9 : 6);
  });
}

TEST(LocalCommunicator, ProcessGroupsFollowTheTopology) {
  const Topology t({.tp = 2, .cp = 2, .dp = 2, .pp = 1});
  run_local(8, [&](Communicator& c) {
    ProcessGroups g = make_process_groups(c, t);
    const Coordinates me = t.coordinates(c.rank());
    EXPECT_EQ(g.tp->rank(), me.tp);
    EXPECT_EQ(g.cp->rank(), me.cp);
    EXPECT_EQ(g.dp->rank(), me.dp);
    EXPECT_EQ(g.dp_cp->size(), 4);
    EXPECT_EQ(g.dp_cp->rank(), me.cp + 2 * me.dp);
    // Members of my DP group share tp and cp.
    std::vector<int64_t> key = {me.tp * 10 + me.cp};
    g.dp->allreduce(key, ReduceOp::kMax);
    EXPECT_EQ(key[0], me.tp * 10 + me.cp);
  });
}

TEST(LocalCommunicator, APeerThatThrowsFailsTheOthersInsteadOfHanging) {
  std::atomic<int> comm_errors{0};
  test_util::expect_throw_with<InvalidArgument>(
      [&] {
        run_local(4, [&](Communicator& c) {
          if (c.rank() == 2) throw InvalidArgument("rank 2 gave up");
          try {
            c.barrier();
          } catch (const CommError&) {
            ++comm_errors;
            throw;
          }
        });
      },
      "rank 2 gave up");
  EXPECT_EQ(comm_errors.load(), 3);
}

TEST(LocalCommunicator, ASkippedCollectiveTimesOut) {
  test_util::expect_throw_with<CommError>(
      [] {
        run_local(
            2,
            [](Communicator& c) {
              if (c.rank() == 0) c.barrier();
            },
            LocalOptions{.timeout_seconds = 0.2});
      },
      "did not complete");
}

TEST(LocalCommunicator, BadArgumentsAreCommErrors) {
  test_util::expect_throw_with<CommError>(
      [] {
        run_local(2, [](Communicator& c) {
          std::vector<std::byte> d(4);
          c.broadcast(d, 7);
        });
      },
      "broadcast");
  test_util::expect_throw_with<CommError>(
      [] {
        run_local(2, [](Communicator& c) {
          std::vector<std::byte> recv(1);
          std::vector<int64_t> counts = {1, 1};
          c.allgatherv({}, recv, counts);
        });
      },
      "allgatherv");
}

// Ranks that disagree on how much a rank sends (the peers of a rank that took another path) are
// told so, instead of reading past that rank's buffer.
TEST(LocalCommunicator, AllgathervCountsThatDisagreeWithTheSenderAreCommErrors) {
  test_util::expect_throw_with<CommError>(
      [] {
        run_local(2, [](Communicator& c) {
          const std::vector<std::byte> send(c.rank() == 0 ? 8 : 24);
          std::vector<int64_t> counts = {8, 8};  // rank 1 sends 24
          counts[static_cast<size_t>(c.rank())] = static_cast<int64_t>(send.size());
          std::vector<std::byte> recv(static_cast<size_t>(counts[0] + counts[1]));
          c.allgatherv(send, recv, counts);
        });
      },
      "rank 1 sends 24 bytes, rank 0 expects 8");
}

}  // namespace
}  // namespace thdpack
