// The intra-microbatch reordering exchange (reorder_exchange.hpp): gather metadata, assign,
// move serialized samples with one alltoallv, check what arrived; optionally on a background
// thread, one window ahead.

#include "thdpack/pipeline/reorder_exchange.hpp"
#include "thdpack/core/hash64.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>
#include <exception>
#include <limits>
#include <numeric>
#include <string>
#include <thread>

#include "thdpack/comm/agreement.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

using Clock = std::chrono::steady_clock;

// What every rank says about its window before any metadata moves.
struct WindowHeader {
  uint64_t fingerprint = 0;  // of the schema
  uint64_t settings = 0;     // hash of every option the ranks must share (settings_hash)
  int64_t microbatches = 0;
  int64_t error = 0;  // 1: this rank's samples are bad (its message follows)
};

/// A hash of the options that decide sizes, the assignment and whether anything moves: ranks
/// that differ in any of them would disagree on the collectives' sizes.
uint64_t settings_hash(const ReorderOptions& o, int64_t groups) {
  const int64_t values[] = {o.microbatch_size,
                            groups,
                            static_cast<int64_t>(o.window),
                            static_cast<int64_t>(o.reorder),
                            static_cast<int64_t>(o.assignment.method),
                            o.assignment.max_swaps,
                            o.cost.image_token_id,
                            o.cost.spatial_merge_size,
                            o.cost.pad_id,
                            o.max_exchange_bytes};
  return Hash64()
      .add_all(std::span<const int64_t>(values))
      .add(o.cost.vision_weight)
      .add(o.cost.text_weight)
      .digest();
}

/// Bytes one alltoallv may hold per rank (the MPI backend's counts and offsets are ints).
constexpr int64_t kMaxExchangeBytes = std::numeric_limits<int32_t>::max();

// Per-sample metadata as int64 words: id, cost, vision cost (doubles as bits), then the dims.
constexpr int64_t kFixedWords = 3;

int64_t as_word(double v) {
  return std::bit_cast<int64_t>(v);
}
double as_double(int64_t w) {
  return std::bit_cast<double>(w);
}

// Every rank throws the same InvalidArgument when any rank reported an error; messages travel
// only then.
void raise_if_any(Communicator& group, const std::vector<WindowHeader>& headers,
                  const std::string& my_error) {
  bool any = false;
  for (const WindowHeader& h : headers) any = any || h.error != 0;
  if (!any) return;
  const std::vector<std::string> errors = allgather_strings(group, my_error);
  for (size_t r = 0; r < headers.size(); ++r) {
    if (headers[r].error != 0) fail("reorder: DP rank ", r, ": ", errors[r]);
  }
}

double spread(const std::vector<double>& per_rank) {
  const auto [lo, hi] = std::minmax_element(per_rank.begin(), per_rank.end());
  if (*hi <= 0) return 1.0;
  if (*lo <= 0) return std::numeric_limits<double>::infinity();
  return *hi / *lo;
}

double mean_spread(const std::vector<std::vector<double>>& per_mb) {
  if (per_mb.empty()) return 1.0;
  double sum = 0;
  for (const auto& v : per_mb) sum += spread(v);
  return sum / static_cast<double>(per_mb.size());
}

}  // namespace

namespace {

// The slots of a reordered window's micro-batches, each filled exactly once.
class SlotFiller {
 public:
  SlotFiller(ReorderedWindow& window, const std::vector<std::vector<int64_t>>& slot_of)
      : window_(window), slot_of_(slot_of) {
    for (const auto& positions : window.positions) filled_.emplace_back(positions.size(), 0);
  }

  /// Puts the sample of position `p` of micro-batch `k` in its slot.
  void place(int64_t k, int64_t p, MultimodalSample sample) {
    const int64_t slot = slot_of_[static_cast<size_t>(k)][static_cast<size_t>(p)];
    auto& flag = filled_[static_cast<size_t>(k)];
    check<InternalError>(slot >= 0 && !flag[static_cast<size_t>(slot)], "reorder: position ", p,
                         " of micro-batch ", k, " arrived ",
                         slot < 0 ? "here by mistake" : "twice");
    flag[static_cast<size_t>(slot)] = 1;
    window_.microbatches[static_cast<size_t>(k)][static_cast<size_t>(slot)] = std::move(sample);
  }

  /// Throws InternalError when a slot is still empty.
  void check_full() const {
    for (size_t k = 0; k < filled_.size(); ++k) {
      const auto& flag = filled_[k];
      check<InternalError>(std::find(flag.begin(), flag.end(), 0) == flag.end(),
                           "reorder: a slot of micro-batch ", k, " received no sample");
    }
  }

 private:
  ReorderedWindow& window_;
  const std::vector<std::vector<int64_t>>& slot_of_;
  std::vector<std::vector<uint8_t>> filled_;
};

}  // namespace

struct ReorderExchange::State {
  Communicator* group = nullptr;
  SampleSchema schema;
  ReorderOptions options;
  int64_t groups = 1;
  uint64_t settings = 0;  // settings_hash(options, groups), the same on every window
  int dp = 1;
  int rank = 0;
  int64_t shard = 0;  // B / dp
  int64_t words = 0;  // metadata words per sample

  std::thread worker;
  ReorderedWindow pending;
  std::exception_ptr pending_error;
  std::atomic<bool> in_flight{false};  // read by in_flight() from any thread

  /// One window; with `local_error` set, this rank reports it instead of its samples and every
  /// rank raises it.
  ReorderedWindow run(std::vector<std::vector<MultimodalSample>> shards,
                      const std::string& local_error = {});

  /// This rank's part of a window: per sample `words` metadata words (id, cost, vision cost,
  /// dimensions) and its serialized size.
  struct LocalWindow {
    std::vector<int64_t> meta;
    std::vector<int64_t> bytes;
  };
  /// Fills `local` from this rank's shards; throws InvalidArgument on a malformed window or
  /// sample.
  void describe_window(const std::vector<std::vector<MultimodalSample>>& shards,
                       LocalWindow& local) const;

  /// Where every sample of the window goes: the window (stats, positions, empty micro-batches of
  /// the right sizes), what this rank sends to and receives from each rank as (micro-batch,
  /// position) pairs and their bytes, and each kept position's slot.
  struct Moves {
    ReorderedWindow window;
    std::vector<std::vector<int64_t>> send_order, recv_order;
    std::vector<int64_t> send_bytes, recv_bytes;
    std::vector<std::vector<int64_t>> slot_of;  // per micro-batch: position -> slot, -1 elsewhere
  };
  /// The assignment of every micro-batch from every rank's metadata; throws InvalidArgument (on
  /// every rank alike) when a rank would exchange more than max_exchange_bytes.
  Moves plan_moves(int64_t window_mbs, const std::vector<int64_t>& all_meta) const;
  /// The bytes this rank sends, in (destination, micro-batch, position) order.
  std::vector<std::byte> serialize_leaving(const std::vector<std::vector<MultimodalSample>>& shards,
                                           const Moves& moves, const LocalWindow& local) const;
  /// This rank's window described and checked, and every rank's header compared (one allgather):
  /// throws on every rank when any rank failed or the ranks disagree.
  LocalWindow agree_on_window(const std::vector<std::vector<MultimodalSample>>& shards,
                              const std::string& local_error);
  /// Places the samples received (`recv`, in each source's agreed order) into their slots.
  void unpack_received(std::span<const std::byte> recv, const Moves& moves,
                       const std::vector<int64_t>& all_meta, int64_t window_mbs,
                       SlotFiller& slots) const;
};

void validate(const ReorderOptions& o, int dp) {
  validate(o.cost, o.reorder);
  if (o.window < 1) {
    thdpack::fail("reorder window must be >= 1 micro-batch, got ", std::to_string(o.window));
  }
  if (o.max_exchange_bytes < 1 || o.max_exchange_bytes > kMaxExchangeBytes) {
    thdpack::fail("reorder: max_exchange_bytes must be 1 to ", std::to_string(kMaxExchangeBytes),
                  ", got ", std::to_string(o.max_exchange_bytes));
  }
  const std::vector<int> sizes =
      o.module_dp_sizes.empty() ? std::vector<int>{dp} : o.module_dp_sizes;
  if (std::find(sizes.begin(), sizes.end(), dp) == sizes.end()) {
    thdpack::fail("reorder: this DP group has ", std::to_string(dp),
                  " ranks but the module DP sizes given do not include ", std::to_string(dp));
  }
  const int64_t groups = canonical_groups(sizes);
  if (o.microbatch_size < 1 || o.microbatch_size % groups != 0) {
    thdpack::fail(
        "reorder: the micro-batch size ", std::to_string(o.microbatch_size),
        " must be a positive multiple of G = lcm(module DP sizes) = ", std::to_string(groups));
  }
}

ReorderExchange::ReorderExchange(Communicator& dp_group, SampleSchema schema,
                                 ReorderOptions options)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.group = &dp_group;
  s.schema = std::move(schema);
  s.options = std::move(options);
  s.dp = dp_group.size();
  s.rank = dp_group.rank();
  ReorderOptions& o = s.options;
  validate(o, s.dp);
  if (o.module_dp_sizes.empty()) o.module_dp_sizes = {s.dp};
  s.groups = canonical_groups(o.module_dp_sizes);
  s.settings = settings_hash(o, s.groups);
  s.shard = o.microbatch_size / s.dp;
  s.words = kFixedWords + s.schema.total_dims();
}

ReorderExchange::~ReorderExchange() {
  if (state_ && state_->worker.joinable()) state_->worker.join();
}

const ReorderOptions& ReorderExchange::options() const {
  return state_->options;
}
int64_t ReorderExchange::groups() const {
  return state_->groups;
}
bool ReorderExchange::in_flight() const {
  return state_->in_flight;
}

ReorderedWindow ReorderExchange::exchange(std::vector<std::vector<MultimodalSample>> shards) {
  if (state_->in_flight) {
    throw InvalidArgument("reorder: exchange() while a window is in flight; call finish() first");
  }
  const auto start = Clock::now();
  ReorderedWindow out = state_->run(std::move(shards));
  out.stats.exchange_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return out;
}

void ReorderExchange::start(std::vector<std::vector<MultimodalSample>> shards) {
  State& s = *state_;
  if (s.in_flight) {
    throw InvalidArgument("reorder: start() while a window is in flight; call finish() first");
  }
  if (!s.group->allows_other_threads()) {
    throw InvalidArgument(
        "reorder: overlapped exchange runs collectives on a background thread, which this "
        "communicator does not allow (MPI needs MPI_Init_thread with MPI_THREAD_SERIALIZED or "
        "higher); initialise MPI so, or use the synchronous exchange");
  }
  s.pending_error = nullptr;
  s.worker = std::thread([&s, shards = std::move(shards)]() mutable {
    try {
      s.pending = s.run(std::move(shards));
    } catch (...) {
      s.pending_error = std::current_exception();
    }
  });
  s.in_flight = true;  // only once the thread exists: a failed launch leaves nothing in flight
}

void ReorderExchange::fail(const std::string& message) {
  if (state_->in_flight) {
    throw InvalidArgument("reorder: fail() while a window is in flight; call finish() first");
  }
  state_->run({}, message.empty() ? std::string("unknown error") : message);
  throw InternalError("reorder: fail() returned without raising");
}

ReorderedWindow ReorderExchange::finish() {
  State& s = *state_;
  if (!s.in_flight) throw InvalidArgument("reorder: finish() without start()");
  const auto start = Clock::now();
  s.worker.join();
  s.in_flight = false;
  if (s.pending_error) std::rethrow_exception(s.pending_error);
  ReorderedWindow out = std::move(s.pending);
  out.stats.exchange_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return out;
}

namespace {

// The ranks' window headers agree (schema, options, micro-batch count), or every rank throws the
// same InvalidArgument naming the first rank that differs from rank 0.
void check_headers_agree(const std::vector<WindowHeader>& headers) {
  std::vector<std::vector<AgreedValue>> all;
  for (const WindowHeader& h : headers) {
    all.push_back(
        {{"the sample schema (field names, types or ranks; digest)", std::to_string(h.fingerprint)},
         {"the reorder options (micro-batch size, module DP sizes, window, method, cost, "
          "max_exchange_bytes; digest)",
          std::to_string(h.settings)},
         {"the number of micro-batches in the window", std::to_string(h.microbatches)}});
  }
  require_agreement(all, "reorder: DP ");
}

}  // namespace

void ReorderExchange::State::describe_window(
    const std::vector<std::vector<MultimodalSample>>& shards, LocalWindow& local) const {
  const auto window_mbs = static_cast<int64_t>(shards.size());
  local.meta.resize(static_cast<size_t>(window_mbs * shard * words));
  local.bytes.resize(static_cast<size_t>(window_mbs * shard));
  if (window_mbs < 1 || window_mbs > options.window) {
    thdpack::fail("a window holds 1 to ", std::to_string(options.window), " micro-batches, got ",
                  std::to_string(window_mbs));
  }
  for (int64_t k = 0; k < window_mbs; ++k) {
    const auto& mb = shards[static_cast<size_t>(k)];
    if (static_cast<int64_t>(mb.size()) != shard) {
      thdpack::fail("micro-batch ", std::to_string(k), " of the window has ",
                    std::to_string(mb.size()),
                    " samples on this rank, expected B/dp = ", std::to_string(shard));
    }
    for (int64_t j = 0; j < shard; ++j) {
      const MultimodalSample& sample = mb[static_cast<size_t>(j)];
      const std::vector<int64_t> dims = sample_dims(sample, schema);
      if (options.check_vision) check_vision_fields(sample, options.cost);
      const std::span<const int64_t> ids = sample.fields.at(kInputIdsField).int64_values();
      int64_t* m = local.meta.data() + (k * shard + j) * words;
      m[0] = sample.id;
      m[1] = as_word(sample_cost(ids, options.cost));
      m[2] = as_word(options.cost.vision_weight *
                     static_cast<double>(image_patches(ids, options.cost)));
      std::copy(dims.begin(), dims.end(), m + kFixedWords);
      local.bytes[static_cast<size_t>(k * shard + j)] = serialized_size(schema, dims);
    }
  }
}

namespace {

// Every rank knows every rank's totals, so all refuse an oversized exchange together.
void refuse_oversized_exchange(const std::vector<int64_t>& sent_by,
                               const std::vector<int64_t>& received_by, int64_t max_bytes) {
  for (size_t r = 0; r < sent_by.size(); ++r) {
    const int64_t most = std::max(sent_by[r], received_by[r]);
    check(most <= max_bytes, "reorder: DP rank ", r, " would exchange ", most,
          " bytes in one window, more than the ", max_bytes,
          " allowed (max_exchange_bytes); use a smaller window or micro-batch size");
  }
}

}  // namespace

ReorderExchange::State::Moves ReorderExchange::State::plan_moves(
    int64_t window_mbs, const std::vector<int64_t>& all_meta) const {
  auto record = [&](int64_t k, int64_t p) {
    const int64_t src = p / shard;
    return all_meta.data() + ((src * window_mbs + k) * shard + p % shard) * words;
  };
  const int64_t B = options.microbatch_size;
  const int64_t groups_per_rank = groups / dp;
  Moves mv;
  mv.send_order.resize(static_cast<size_t>(dp));
  mv.recv_order.resize(static_cast<size_t>(dp));
  mv.send_bytes.assign(static_cast<size_t>(dp), 0);
  mv.recv_bytes.assign(static_cast<size_t>(dp), 0);
  mv.slot_of.resize(static_cast<size_t>(window_mbs));
  ReorderedWindow& out = mv.window;
  ReorderWindowStats& st = out.stats;
  st.microbatches = window_mbs;
  std::vector<std::vector<double>> cost_before_all, cost_after_all;
  std::vector<int64_t> sent_by(static_cast<size_t>(dp), 0), received_by = sent_by;  // every rank
  out.microbatches.resize(static_cast<size_t>(window_mbs));
  out.positions.resize(static_cast<size_t>(window_mbs));
  for (int64_t k = 0; k < window_mbs; ++k) {
    std::vector<double> costs(static_cast<size_t>(B)), vision(static_cast<size_t>(B));
    for (int64_t p = 0; p < B; ++p) {
      costs[static_cast<size_t>(p)] = as_double(record(k, p)[1]);
      vision[static_cast<size_t>(p)] = as_double(record(k, p)[2]);
    }
    const GroupAssignment a = options.reorder ? assign_groups(costs, groups, options.assignment)
                                              : home_assignment(costs, groups);
    std::vector<double> vision_before(static_cast<size_t>(dp), 0.0), vision_after = vision_before;
    std::vector<double> cost_before = vision_before, cost_after = vision_before;
    auto& slots = mv.slot_of[static_cast<size_t>(k)];
    slots.assign(static_cast<size_t>(B), -1);
    for (int64_t gi = 0; gi < groups; ++gi) {
      const int dst = static_cast<int>(gi / groups_per_rank);
      for (int64_t p : a.members[static_cast<size_t>(gi)]) {
        const int src = static_cast<int>(p / shard);
        const int64_t* m = record(k, p);
        vision_before[static_cast<size_t>(src)] += as_double(m[2]);
        vision_after[static_cast<size_t>(dst)] += as_double(m[2]);
        cost_before[static_cast<size_t>(src)] += as_double(m[1]);
        cost_after[static_cast<size_t>(dst)] += as_double(m[1]);
        if (src == dst && dst != rank) continue;
        const int64_t bytes =
            serialized_size(schema, std::span<const int64_t>(m + kFixedWords, m + words));
        if (src != dst) {
          ++st.samples_moved;
          st.bytes_moved += bytes;
          sent_by[static_cast<size_t>(src)] += bytes;
          received_by[static_cast<size_t>(dst)] += bytes;
        }
        if (dst == rank) {
          slots[static_cast<size_t>(p)] =
              static_cast<int64_t>(out.positions[static_cast<size_t>(k)].size());
          out.positions[static_cast<size_t>(k)].push_back(p);
          if (src != rank) {
            auto& order = mv.recv_order[static_cast<size_t>(src)];
            order.insert(order.end(), {k, p});
            mv.recv_bytes[static_cast<size_t>(src)] += bytes;
          }
        } else if (src == rank) {
          auto& order = mv.send_order[static_cast<size_t>(dst)];
          order.insert(order.end(), {k, p});
          mv.send_bytes[static_cast<size_t>(dst)] += bytes;
        }
      }
    }
    st.sample_costs.push_back(std::move(costs));
    st.sample_vision_costs.push_back(std::move(vision));
    st.vision_cost_before.push_back(std::move(vision_before));
    st.vision_cost_after.push_back(std::move(vision_after));
    cost_before_all.push_back(std::move(cost_before));
    cost_after_all.push_back(std::move(cost_after));
    out.microbatches[static_cast<size_t>(k)].resize(out.positions[static_cast<size_t>(k)].size());
  }
  st.cost_spread_before = mean_spread(cost_before_all);
  st.cost_spread_after = mean_spread(cost_after_all);
  st.spread_before = mean_spread(st.vision_cost_before);
  st.spread_after = mean_spread(st.vision_cost_after);
  refuse_oversized_exchange(sent_by, received_by, options.max_exchange_bytes);
  return mv;
}

std::vector<std::byte> ReorderExchange::State::serialize_leaving(
    const std::vector<std::vector<MultimodalSample>>& shards, const Moves& mv,
    const LocalWindow& local) const {
  std::vector<std::byte> send(
      static_cast<size_t>(std::accumulate(mv.send_bytes.begin(), mv.send_bytes.end(), int64_t{0})));
  int64_t at = 0;
  for (int dst = 0; dst < dp; ++dst) {
    const auto& order = mv.send_order[static_cast<size_t>(dst)];
    for (size_t i = 0; i < order.size(); i += 2) {
      const int64_t k = order[i], p = order[i + 1];
      const int64_t j = p - static_cast<int64_t>(rank) * shard;
      const int64_t bytes = local.bytes[static_cast<size_t>(k * shard + j)];
      serialize_sample(
          shards[static_cast<size_t>(k)][static_cast<size_t>(j)], schema,
          std::span<std::byte>(send).subspan(static_cast<size_t>(at), static_cast<size_t>(bytes)));
      at += bytes;
    }
  }
  return send;
}

ReorderExchange::State::LocalWindow ReorderExchange::State::agree_on_window(
    const std::vector<std::vector<MultimodalSample>>& shards, const std::string& local_error) {
  // A bad sample (or anything else thrown here) fails every rank with the same message instead of
  // leaving the others in a collective.
  LocalWindow local;
  std::string error = local_error;
  if (error.empty()) {
    try {
      describe_window(shards, local);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  const auto window_mbs = static_cast<int64_t>(shards.size());
  const WindowHeader mine{schema.fingerprint(), settings, window_mbs, error.empty() ? 0 : 1};
  const std::vector<WindowHeader> headers = allgather_value(*group, mine);
  raise_if_any(*group, headers, error);
  check_headers_agree(headers);
  return local;
}

void ReorderExchange::State::unpack_received(std::span<const std::byte> recv, const Moves& mv,
                                             const std::vector<int64_t>& all_meta,
                                             int64_t window_mbs, SlotFiller& slots) const {
  // Rank r's samples of micro-batch k are positions r·shard + j.
  auto record = [&](int64_t k, int64_t p) {
    const int64_t src = p / shard;
    return all_meta.data() + ((src * window_mbs + k) * shard + p % shard) * words;
  };
  int64_t at = 0;
  for (int src = 0; src < dp; ++src) {
    const int64_t begin = at;
    const auto& order = mv.recv_order[static_cast<size_t>(src)];
    for (size_t i = 0; i < order.size(); i += 2) {
      const int64_t k = order[i], p = order[i + 1];
      const int64_t* m = record(k, p);
      const std::span<const int64_t> dims(m + kFixedWords, m + words);
      const int64_t bytes = serialized_size(schema, dims);
      check<InternalError>(at + bytes <= static_cast<int64_t>(recv.size()),
                           "reorder: the samples from DP rank ", src,
                           " run past the bytes received");
      slots.place(
          k, p,
          deserialize_sample(recv.subspan(static_cast<size_t>(at), static_cast<size_t>(bytes)),
                             schema, m[0], dims));
      at += bytes;
    }
    check<InternalError>(at - begin == mv.recv_bytes[static_cast<size_t>(src)],
                         "reorder: consumed ", at - begin, " bytes from DP rank ", src,
                         " but received ", mv.recv_bytes[static_cast<size_t>(src)]);
  }
}

ReorderedWindow ReorderExchange::State::run(std::vector<std::vector<MultimodalSample>> shards,
                                            const std::string& local_error) {
  const auto window_mbs = static_cast<int64_t>(shards.size());
  // 1. Local metadata and checks, then everyone's metadata.
  const LocalWindow local = agree_on_window(shards, local_error);
  const std::vector<int64_t> all_meta = allgather_vector<int64_t>(*group, local.meta);

  // 2. Assignment per micro-batch and the resulting moves.
  Moves mv = plan_moves(window_mbs, all_meta);
  ReorderedWindow& out = mv.window;

  // 3. Serialize what leaves, in (destination, micro-batch, position) order; move what stays.
  const std::vector<std::byte> send = serialize_leaving(shards, mv, local);
  SlotFiller slots(out, mv.slot_of);
  for (int64_t k = 0; k < window_mbs; ++k) {
    for (int64_t j = 0; j < shard; ++j) {
      const int64_t p = static_cast<int64_t>(rank) * shard + j;
      if (mv.slot_of[static_cast<size_t>(k)][static_cast<size_t>(p)] >= 0) {
        slots.place(k, p, std::move(shards[static_cast<size_t>(k)][static_cast<size_t>(j)]));
      }
    }
  }

  // 4. One alltoallv (skipped when nothing moves anywhere), then unpack in the agreed order.
  std::vector<std::byte> recv(
      static_cast<size_t>(std::accumulate(mv.recv_bytes.begin(), mv.recv_bytes.end(), int64_t{0})));
  if (out.stats.samples_moved > 0) group->alltoallv(send, mv.send_bytes, recv, mv.recv_bytes);
  unpack_received(recv, mv, all_meta, window_mbs, slots);
  slots.check_full();
  return std::move(out);
}

}  // namespace thdpack
