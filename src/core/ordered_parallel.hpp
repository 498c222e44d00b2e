#pragma once
// Running independent tasks on a few threads and taking their results back in order.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

namespace thdpack::detail {

/// Threads for reading work: the machine's hardware threads, at least 1 and at most `cap`.
inline unsigned reading_threads(unsigned cap = 8) {
  return std::clamp(std::thread::hardware_concurrency(), 1u, cap);
}

/// task(i) for every i in [0, n), on up to `threads` threads (the caller's among them; threads
/// take the next i as they finish one), returned in order of i. When tasks throw, the exception
/// of the lowest i that threw is rethrown once every thread has stopped, so the error a caller
/// sees is the one a sequential loop would have met first; tasks past a failed i may be skipped.
template <class T, class Task>
std::vector<T> ordered_parallel_map(size_t n, unsigned threads, Task task) {
  std::vector<std::optional<T>> results(n);
  std::vector<std::exception_ptr> errors(n);
  std::atomic<size_t> next{0};
  std::atomic<size_t> first_failed{n};
  const auto work = [&] {
    for (size_t i = next++; i < n && i < first_failed.load(); i = next++) {
      try {
        results[i].emplace(task(i));
      } catch (...) {
        errors[i] = std::current_exception();
        size_t seen = first_failed.load();
        while (i < seen && !first_failed.compare_exchange_weak(seen, i)) {
        }
      }
    }
  };
  const size_t helpers = std::min<size_t>(n, std::max(threads, 1u)) - (n > 0 ? 1 : 0);
  std::vector<std::thread> pool;
  pool.reserve(helpers);
  for (size_t t = 0; t < helpers; ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads to be had: the ones started, and this one, do the rest
    }
  }
  work();
  for (std::thread& t : pool) t.join();
  if (first_failed.load() < n) std::rethrow_exception(errors[first_failed.load()]);
  std::vector<T> out;
  out.reserve(n);
  for (std::optional<T>& r : results) out.push_back(std::move(*r));
  return out;
}

}  // namespace thdpack::detail
