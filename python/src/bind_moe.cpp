// MoE expert-parallel dispatch and combine for Python (numpy arrays), named after DeepEP's buffer
// methods: get_dispatch_layout, dispatch, combine, plus the two backward passes.

#include "bindings.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/pipeline/moe_dispatch.hpp"

namespace thdpack::python {
namespace {

template <typename T>
using Matrix = py::array_t<T, py::array::c_style | py::array::forcecast>;

/// Rows and columns of a 2-D array argument (a clear error otherwise).
std::pair<int64_t, int64_t> shape_of(const py::array& a, const char* name) {
  check(a.ndim() == 2, name, " must be two-dimensional, got ", a.ndim(), " dimensions");
  return {a.shape(0), a.shape(1)};
}

/// Checks that `a` is [rows, hidden] for the handle's hidden size.
void check_width(const py::array& a, const char* name, const DispatchHandle& handle) {
  const auto [rows, cols] = shape_of(a, name);
  check(cols == handle.hidden, name, " has ", cols, " columns but the dispatch moved rows of ",
        handle.hidden);
}

/// Expert indices as int64: any integer array converts, a float array (1.7 would silently become
/// expert 1) or any other kind is refused.
Matrix<int64_t> index_matrix(const py::array& a, const char* name) {
  const char kind = a.dtype().kind();
  check(kind == 'i' || kind == 'u', name, " must hold integers (expert indices, -1 for none), got ",
        py::str(a.dtype()).cast<std::string>());
  return Matrix<int64_t>::ensure(a);
}

template <typename T>
std::span<const T> values_of(const Matrix<T>& a) {
  return {a.data(), static_cast<size_t>(a.size())};
}

/// A [rows, cols] numpy array taking over `values` (no copy).
template <typename T>
py::array_t<T> matrix_from(std::vector<T>&& values, int64_t cols) {
  auto* owned = new std::vector<T>(std::move(values));
  py::capsule owner(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  const auto rows = cols > 0 ? static_cast<py::ssize_t>(owned->size()) / cols : 0;
  const std::vector<py::ssize_t> shape = {rows, static_cast<py::ssize_t>(cols)};
  const std::vector<py::ssize_t> strides = {static_cast<py::ssize_t>(cols * sizeof(T)),
                                            static_cast<py::ssize_t>(sizeof(T))};
  return py::array_t<T>(shape, strides, owned->data(), owner);
}

std::vector<float> run_released(const std::function<std::vector<float>()>& body) {
  py::gil_scoped_release release;
  return body();
}

// The handle and the routing layout: what dispatch sends where.
void bind_routing(py::module_& m) {
  py::class_<DispatchHandle>(m, "DispatchHandle",
                             "What combine and the backward passes need to reverse a dispatch.")
      .def_readonly("hidden", &DispatchHandle::hidden)
      .def_readonly("k", &DispatchHandle::k)
      .def_readonly("num_tokens", &DispatchHandle::num_tokens)
      .def_readonly("padded_tokens", &DispatchHandle::padded_tokens)
      .def_property_readonly("send_rows",
                             [](const DispatchHandle& h) { return copy_of<int64_t>(h.send_rows); })
      .def_property_readonly("recv_rows",
                             [](const DispatchHandle& h) { return copy_of<int64_t>(h.recv_rows); })
      .def_property_readonly("num_recv_rows", [](const DispatchHandle& h) {
        int64_t rows = 0;
        for (int64_t r : h.recv_rows) rows += r;
        return rows;
      });

  m.def(
      "moe_dispatch_layout",
      [](const py::array& topk_indices, int num_experts, int ranks) {
        const Matrix<int64_t> topk_idx = index_matrix(topk_indices, "topk_idx");
        const auto [tokens, k] = shape_of(topk_idx, "topk_idx");
        const RoutingLayout l =
            routing_layout(values_of(topk_idx), tokens, static_cast<int>(k), num_experts, ranks);
        py::array_t<bool> in_rank(
            {static_cast<py::ssize_t>(tokens), static_cast<py::ssize_t>(ranks)});
        std::transform(l.token_in_rank.begin(), l.token_in_rank.end(), in_rank.mutable_data(),
                       [](uint8_t v) { return v != 0; });
        return py::make_tuple(copy_of<int64_t>(l.tokens_per_rank),
                              copy_of<int64_t>(l.tokens_per_expert), in_rank);
      },
      py::arg("topk_idx"), py::arg("num_experts"), py::arg("ranks"),
      "Where tokens go: (num_tokens_per_rank [ranks], num_tokens_per_expert [num_experts], "
      "is_token_in_rank [tokens, ranks] bool). topk_idx is [tokens, k] int64, -1 for none; rank "
      "r hosts experts [r*E/ranks, (r+1)*E/ranks).");
}

void bind_dispatch(py::module_& m) {
  m.def(
      "moe_dispatch",
      [](Communicator& ep, const Matrix<float>& x, const py::array& topk_indices,
         const Matrix<float>& topk_weights, int num_experts, int64_t expert_alignment, bool padded,
         int64_t pad_alignment, std::shared_ptr<Communicator> pad_group) {
        const Matrix<int64_t> topk_idx = index_matrix(topk_indices, "topk_idx");
        const auto [tokens, hidden] = shape_of(x, "x");
        const auto [idx_tokens, k] = shape_of(topk_idx, "topk_idx");
        const auto [weight_tokens, weight_k] = shape_of(topk_weights, "topk_weights");
        if (idx_tokens != tokens || weight_tokens != tokens || weight_k != k) {
          fail("dispatch: x is [", tokens, ", ", hidden, "] but topk_idx is [", idx_tokens, ", ", k,
               "] and topk_weights [", weight_tokens, ", ", weight_k,
               "]: all need the same tokens and k");
        }
        DispatchOptions options;
        options.num_experts = num_experts;
        options.expert_alignment = expert_alignment;
        options.padded = padded;
        options.pad_alignment = pad_alignment;
        options.pad_group = pad_group.get();
        DispatchResult r;
        {
          py::gil_scoped_release release;
          r = dispatch(ep, values_of(x), values_of(topk_idx), values_of(topk_weights), tokens,
                       hidden, static_cast<int>(k), options);
        }
        auto per_expert = copy_of<int64_t>(r.tokens_per_expert);
        auto aligned = copy_of<int64_t>(r.aligned_tokens_per_expert);
        return py::make_tuple(
            matrix_from(std::move(r.hidden), hidden), matrix_from(std::move(r.topk_idx), k),
            matrix_from(std::move(r.topk_weights), k), per_expert, aligned, std::move(r.handle));
      },
      py::arg("comm"), py::arg("x"), py::arg("topk_idx"), py::arg("topk_weights"),
      py::arg("num_experts"), py::arg("expert_alignment") = 1, py::arg("padded") = false,
      py::arg("pad_alignment") = 64, py::arg("pad_group") = nullptr,
      "Sends each token of x [tokens, hidden] (float32) once to every EP rank hosting one of its "
      "experts. Returns (recv_x [rows, hidden], recv_topk_idx [rows, k] local ids or -1, "
      "recv_topk_weights [rows, k], num_recv_tokens_per_expert, aligned to expert_alignment, "
      "handle). Rows are grouped by source rank, then source token order. padded=True pads every "
      "rank to the group maximum rounded up to pad_alignment (HybridEP shapes); results are "
      "identical. A collective over comm.");
}

// combine, and the backward passes of dispatch and combine: collectives along a dispatch's handle.
void bind_combine_and_backward(py::module_& m) {
  m.def(
      "moe_combine",
      [](Communicator& ep, const Matrix<float>& x, const DispatchHandle& handle) {
        check_width(x, "x", handle);
        return matrix_from(run_released([&] { return combine(ep, values_of(x), handle); }),
                           handle.hidden);
      },
      py::arg("comm"), py::arg("x"), py::arg("handle"),
      "Sends expert outputs x [rows, hidden] (dispatch's row order) back and sums them per source "
      "token, unweighted. Returns [tokens, hidden]. A collective over comm.");

  m.def(
      "moe_combine_values",
      [](Communicator& ep, const Matrix<float>& values, const DispatchHandle& handle) {
        const int64_t columns = shape_of(values, "values").second;
        return matrix_from(
            run_released([&] { return combine_values(ep, values_of(values), columns, handle); }),
            columns);
      },
      py::arg("comm"), py::arg("values"), py::arg("handle"),
      "combine for rows of any width: values [rows, columns] -> [tokens, columns], summed per "
      "token (e.g. the gradient of recv_topk_weights, masked to local experts, with columns = k).");

  m.def(
      "moe_dispatch_backward",
      [](Communicator& ep, const Matrix<float>& grad, const DispatchHandle& handle) {
        check_width(grad, "grad", handle);
        return matrix_from(
            run_released([&] { return dispatch_backward(ep, values_of(grad), handle); }),
            handle.hidden);
      },
      py::arg("comm"), py::arg("grad"), py::arg("handle"),
      "Gradient of dispatch's recv_x [rows, hidden] -> gradient of x [tokens, hidden] (a "
      "combine).");

  m.def(
      "moe_combine_backward",
      [](Communicator& ep, const Matrix<float>& grad, const DispatchHandle& handle) {
        check_width(grad, "grad", handle);
        return matrix_from(
            run_released([&] { return combine_backward(ep, values_of(grad), handle); }),
            handle.hidden);
      },
      py::arg("comm"), py::arg("grad"), py::arg("handle"),
      "Gradient of combine's output [tokens, hidden] -> gradient of its input [rows, hidden] (a "
      "dispatch along the cached layout).");
}

}  // namespace

void bind_moe(py::module_& m) {
  bind_routing(m);
  bind_dispatch(m);
  bind_combine_and_backward(m);
}

}  // namespace thdpack::python
