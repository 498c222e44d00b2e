#include "thdpack/pipeline/moe_dispatch.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "thdpack/comm/agreement.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

// What each rank reports before any data moves, so that every rank reaches the same verdict.
struct Status {
  int64_t tokens = 0;
  int64_t k = 0;
  int64_t hidden = 0;
  int64_t experts = 0;
  int64_t bad = 0;  // this rank's routing or shapes are invalid (its message follows)
};

// Every rank raises the same error if any rank's input is bad or the ranks disagree on the shape.
// One allgather; two more only when something is wrong (to share the message).
void check_agreement(Communicator& ep, const Status& mine, const std::string& my_error) {
  const std::vector<Status> all = allgather_value(ep, mine);
  bool any_bad = false;
  for (const Status& s : all) any_bad = any_bad || s.bad;
  if (any_bad) {
    const std::vector<char> text(my_error.begin(), my_error.end());
    const std::vector<char> joined = allgather_vector<char>(ep, text);
    const std::vector<int64_t> sizes =
        allgather_value<int64_t>(ep, static_cast<int64_t>(text.size()));
    int64_t at = 0;
    for (size_t r = 0; r < all.size(); ++r) {
      if (all[r].bad) {
        fail("dispatch: EP rank ", r, ": ",
             std::string(joined.begin() + at, joined.begin() + at + sizes[r]));
      }
      at += sizes[r];
    }
  }
  std::vector<std::vector<AgreedValue>> shapes;
  for (const Status& s : all) {
    shapes.push_back({{"the k", std::to_string(s.k)},
                      {"the hidden size", std::to_string(s.hidden)},
                      {"the number of experts", std::to_string(s.experts)}});
  }
  require_agreement(shapes, "dispatch: EP ");
}

// Bytes of one dispatched row's routing: k int64 local ids, then k float weights, padded to keep
// rows 8-byte aligned.
int64_t meta_bytes(int k) {
  return (k * 8 + k * 4 + 7) / 8 * 8;
}

std::vector<int64_t> scaled(const std::vector<int64_t>& rows, int64_t bytes) {
  std::vector<int64_t> out(rows);
  for (int64_t& v : out) v *= bytes;
  return out;
}

// A buffer that is written in full before it is read: not zero-filled first (the staging buffers
// are as large as the hidden states, and filling them costs as much as the copy itself).
template <typename T>
class Scratch {
 public:
  explicit Scratch(int64_t n)
      : data_(new T[static_cast<size_t>(n)]), size_(static_cast<size_t>(n)) {}
  T* data() { return data_.get(); }
  std::span<T> span() { return {data_.get(), size_}; }
  std::span<const T> span() const { return {data_.get(), size_}; }

 private:
  std::unique_ptr<T[]> data_;
  size_t size_;
};

int64_t total(const std::vector<int64_t>& v) {
  int64_t t = 0;
  for (int64_t x : v) t += x;
  return t;
}

// Every rank learns whether every rank's input is well formed before anything moves: a bad one
// raises everywhere (check_agreement).
void check_dispatch_input(Communicator& ep, std::span<const float> hidden,
                          std::span<const int64_t> topk_idx, std::span<const float> topk_weights,
                          int64_t num_tokens, int64_t hidden_size, int k, int num_experts) {
  Status mine{num_tokens, k, hidden_size, num_experts, 0};
  std::string error;
  try {
    if (num_tokens < 0 || hidden_size < 1 || k < 1) {
      throw InvalidArgument("needs tokens >= 0, hidden size >= 1 and k >= 1");
    }
    check(static_cast<int64_t>(hidden.size()) == num_tokens * hidden_size, "hidden has ",
          hidden.size(), " values, expected ", num_tokens, " x ", hidden_size);
    check(static_cast<int64_t>(topk_weights.size()) == num_tokens * k, "topk_weights has ",
          topk_weights.size(), " values, expected ", num_tokens, " x ", k);
    routing_layout(topk_idx, num_tokens, k, num_experts, ep.size());  // validates the ids
  } catch (const InvalidArgument& e) {
    mine.bad = 1;
    error = e.what();
  }
  check_agreement(ep, mine, error);
}

// The rows this rank sends, grouped by destination rank in token order: each token's hidden state
// into `send_hidden`, and into `send_meta` its expert ids local to that rank (-1 for the others)
// and their weights (0 for the others); which token each row is goes to h.row_token.
void write_send_rows(const RoutingLayout& layout, std::span<const int64_t> idx,
                     std::span<const float> hidden, std::span<const float> topk_weights,
                     int experts_per_rank, DispatchHandle& h, float* send_hidden,
                     std::byte* send_meta) {
  const int ranks = static_cast<int>(h.send_rows.size());
  const int64_t hidden_size = h.hidden;
  const int k = h.k;
  const int64_t padded_tokens = h.padded_tokens;
  const int64_t meta = meta_bytes(k);
  const int64_t sent = total(h.send_rows);
  h.row_token.reserve(static_cast<size_t>(sent));
  int64_t row = 0;
  for (int r = 0; r < ranks; ++r) {
    const int64_t first_expert = static_cast<int64_t>(r) * experts_per_rank;
    for (int64_t t = 0; t < padded_tokens; ++t) {
      if (!layout.token_in_rank[static_cast<size_t>(t * ranks + r)]) continue;
      h.row_token.push_back(t);
      // Pad rows (t >= num_tokens) never visit a rank, so every row here is a real token.
      std::memcpy(send_hidden + row * hidden_size, hidden.data() + t * hidden_size,
                  static_cast<size_t>(hidden_size) * 4);
      std::byte* ids = send_meta + row * meta;
      std::byte* weights = ids + k * 8;
      for (int j = 0; j < k; ++j) {
        const int64_t e = idx[static_cast<size_t>(t * k + j)];
        const bool local = e >= first_expert && e < first_expert + experts_per_rank;
        const int64_t local_id = local ? e - first_expert : -1;
        const float w = local ? topk_weights[static_cast<size_t>(t * k + j)] : 0.0f;
        std::memcpy(ids + j * 8, &local_id, 8);
        std::memcpy(weights + j * 4, &w, 4);
      }
      ++row;
    }
  }
}

}  // namespace

DispatchResult dispatch(Communicator& ep, std::span<const float> hidden,
                        std::span<const int64_t> topk_idx, std::span<const float> topk_weights,
                        int64_t num_tokens, int64_t hidden_size, int k,
                        const DispatchOptions& options) {
  const int ranks = ep.size();
  check_dispatch_input(ep, hidden, topk_idx, topk_weights, num_tokens, hidden_size, k,
                       options.num_experts);

  // Padded mode: equal shapes everywhere, pad rows routed nowhere.
  int64_t padded_tokens = num_tokens;
  std::vector<int64_t> padded_idx;
  std::span<const int64_t> idx = topk_idx;
  if (options.padded) {
    Communicator& group = options.pad_group != nullptr ? *options.pad_group : ep;
    std::vector<int64_t> most = {num_tokens};
    group.allreduce(most, ReduceOp::kMax);
    const int64_t align = std::max<int64_t>(options.pad_alignment, 1);
    padded_tokens = std::max<int64_t>((most[0] + align - 1) / align * align, align);
    padded_idx.assign(topk_idx.begin(), topk_idx.end());
    padded_idx.resize(static_cast<size_t>(padded_tokens * k), -1);
    idx = padded_idx;
  }
  const RoutingLayout layout = routing_layout(idx, padded_tokens, k, options.num_experts, ranks);
  const int experts_per_rank = options.num_experts / ranks;

  DispatchResult result;
  DispatchHandle& h = result.handle;
  h.hidden = hidden_size;
  h.k = k;
  h.num_tokens = num_tokens;
  h.padded_tokens = padded_tokens;
  h.send_rows = layout.tokens_per_rank;
  h.recv_rows.assign(static_cast<size_t>(ranks), 0);
  {
    const std::vector<int64_t> eights(static_cast<size_t>(ranks), 8);
    ep.alltoallv(std::as_bytes(std::span<const int64_t>(h.send_rows)), eights,
                 std::as_writable_bytes(std::span<int64_t>(h.recv_rows)), eights);
  }

  // Hidden states travel in their own alltoallv straight into the result (no staging copy); the
  // local ids and weights travel beside them in a second one, both in flight together.
  const int64_t sent = total(h.send_rows);
  const int64_t rows = total(h.recv_rows);
  const int64_t meta = meta_bytes(k);
  Scratch<float> send_hidden(sent * hidden_size);
  Scratch<std::byte> send_meta(sent * meta);
  write_send_rows(layout, idx, hidden, topk_weights, experts_per_rank, h, send_hidden.data(),
                  send_meta.data());
  result.hidden.resize(static_cast<size_t>(rows * hidden_size));
  Scratch<std::byte> recv_meta(rows * meta);
  const std::vector<int64_t> send_hidden_bytes = scaled(h.send_rows, hidden_size * 4);
  const std::vector<int64_t> recv_hidden_bytes = scaled(h.recv_rows, hidden_size * 4);
  const std::vector<int64_t> send_meta_bytes = scaled(h.send_rows, meta);
  const std::vector<int64_t> recv_meta_bytes = scaled(h.recv_rows, meta);
  auto hidden_request =
      ep.ialltoallv(std::as_bytes(send_hidden.span()), send_hidden_bytes,
                    std::as_writable_bytes(std::span<float>(result.hidden)), recv_hidden_bytes);
  ep.alltoallv(send_meta.span(), send_meta_bytes, recv_meta.span(), recv_meta_bytes);
  hidden_request->wait();

  result.topk_idx.resize(static_cast<size_t>(rows * k));
  result.topk_weights.resize(static_cast<size_t>(rows * k));
  result.tokens_per_expert.assign(static_cast<size_t>(experts_per_rank), 0);
  for (int64_t i = 0; i < rows; ++i) {
    const std::byte* m = recv_meta.data() + i * meta;
    std::memcpy(result.topk_idx.data() + i * k, m, static_cast<size_t>(k) * 8);
    std::memcpy(result.topk_weights.data() + i * k, m + k * 8, static_cast<size_t>(k) * 4);
    for (int j = 0; j < k; ++j) {
      const int64_t e = result.topk_idx[static_cast<size_t>(i * k + j)];
      if (e >= 0) ++result.tokens_per_expert[static_cast<size_t>(e)];
    }
  }
  const int64_t align = std::max<int64_t>(options.expert_alignment, 1);
  for (int64_t c : result.tokens_per_expert) {
    result.aligned_tokens_per_expert.push_back((c + align - 1) / align * align);
  }
  return result;
}

std::vector<float> combine_values(Communicator& ep, std::span<const float> values, int64_t columns,
                                  const DispatchHandle& h) {
  const int64_t rows = total(h.recv_rows);
  check(columns >= 1 && static_cast<int64_t>(values.size()) == rows * columns,
        "combine: expert output has ", values.size(), " values, expected ", rows, " rows x ",
        columns);
  const int64_t bytes = columns * 4;
  Scratch<float> back(total(h.send_rows) * columns);
  ep.alltoallv(std::as_bytes(values), scaled(h.recv_rows, bytes),
               std::as_writable_bytes(back.span()), scaled(h.send_rows, bytes));
  std::vector<float> out(static_cast<size_t>(h.padded_tokens * columns), 0.0f);
  for (size_t i = 0; i < h.row_token.size(); ++i) {
    float* dst = out.data() + h.row_token[i] * columns;
    const float* src = back.data() + static_cast<int64_t>(i) * columns;
    for (int64_t c = 0; c < columns; ++c) dst[c] += src[c];
  }
  out.resize(static_cast<size_t>(h.num_tokens * columns));  // trim pad rows
  return out;
}

std::vector<float> combine(Communicator& ep, std::span<const float> expert_output,
                           const DispatchHandle& h) {
  return combine_values(ep, expert_output, h.hidden, h);
}

std::vector<float> dispatch_backward(Communicator& ep, std::span<const float> grad_rows,
                                     const DispatchHandle& handle) {
  // d/dx of "copy token t to each rank it visits" sums the copies' gradients: a combine.
  return combine(ep, grad_rows, handle);
}

std::vector<float> combine_backward(Communicator& ep, std::span<const float> grad_output,
                                    const DispatchHandle& h) {
  check(static_cast<int64_t>(grad_output.size()) == h.num_tokens * h.hidden,
        "combine_backward: gradient has ", grad_output.size(), " values, expected ", h.num_tokens,
        " x ", h.hidden);
  // d/d(row) of "sum the rows of token t" is token t's gradient: dispatch it along the same rows.
  const int64_t bytes = h.hidden * 4;
  Scratch<float> send(total(h.send_rows) * h.hidden);
  for (size_t i = 0; i < h.row_token.size(); ++i) {
    std::memcpy(send.data() + static_cast<int64_t>(i) * h.hidden,
                grad_output.data() + h.row_token[i] * h.hidden, static_cast<size_t>(bytes));
  }
  std::vector<float> rows(static_cast<size_t>(total(h.recv_rows) * h.hidden));
  ep.alltoallv(std::as_bytes(send.span()), scaled(h.send_rows, bytes),
               std::as_writable_bytes(std::span<float>(rows)), scaled(h.recv_rows, bytes));
  return rows;
}

}  // namespace thdpack
