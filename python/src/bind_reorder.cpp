// Multimodal intra-microbatch reordering for Python: the cost, the group assignment, in-batch
// packing, the synthetic vision-language workload, and the exchange over a DP group with samples
// as dicts of numpy arrays ({"id": int, "input_ids": int64[L], "pixel_values": float32[P, D],
// "image_grid_thw": int64[I, 3], ...}).

#include <cstring>
#include <exception>
#include <memory>
#include <optional>

#include "bindings.hpp"
#include "strict_values.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/multimodal/vl_workload.hpp"
#include "thdpack/pipeline/reorder_exchange.hpp"

namespace thdpack::python {
namespace {

// ---------------------------------------------------------------------------------------------
// Samples <-> dicts of numpy arrays

/// The field type of an array by dtype kind and item size, so equal dtypes from elsewhere (a
/// pickled array, another byte order) are accepted; bool and 64-bit floats are refused rather than
/// silently converted.
FieldType field_type_of(const py::dtype& dtype, int64_t id, const std::string& name) {
  const char kind = dtype.kind();
  const auto size = dtype.itemsize();
  if (kind == 'i' && size == 8) return FieldType::kInt64;
  if (kind == 'i' && size == 4) return FieldType::kInt32;
  if (kind == 'u' && size == 1) return FieldType::kUInt8;
  if (kind == 'f' && size == 4) return FieldType::kFloat32;
  fail("sample ", id, " field '", name, "' has dtype ",
       py::str(py::handle(dtype)).cast<std::string>(),
       "; fields must be int64, int32, uint8 or float32 arrays");
}

template <typename T>
py::array native_c_order(py::handle value) {
  return py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(value);
}

/// `array` as a C-ordered array of `type` in native byte order (a copy only when it is not one).
py::array native_array(FieldType type, const py::array& array) {
  switch (type) {
    case FieldType::kUInt8:
      return native_c_order<uint8_t>(array);
    case FieldType::kInt32:
      return native_c_order<int32_t>(array);
    case FieldType::kInt64:
      return native_c_order<int64_t>(array);
    case FieldType::kFloat32:
      return native_c_order<float>(array);
    case FieldType::kBFloat16:
      break;
  }
  throw InternalError("no numpy conversion for this field type");
}

py::dtype dtype_of(FieldType type) {
  switch (type) {
    case FieldType::kUInt8:
      return py::dtype::of<uint8_t>();
    case FieldType::kInt32:
      return py::dtype::of<int32_t>();
    case FieldType::kInt64:
      return py::dtype::of<int64_t>();
    case FieldType::kFloat32:
      return py::dtype::of<float>();
    case FieldType::kBFloat16:
      return py::dtype::of<uint16_t>();  // the raw bits
  }
  throw InternalError("unknown field type");
}

MultimodalSample multimodal_from_python(py::handle object, int64_t default_id) {
  if (!py::isinstance<py::dict>(object)) {
    fail("a multimodal sample must be a dict of arrays, got ",
         py::str(py::type::of(object)).cast<std::string>());
  }
  const auto dict = py::reinterpret_borrow<py::dict>(object);
  MultimodalSample sample;
  sample.id = dict.contains("id") ? int64_value(dict["id"], "sample 'id'") : default_id;
  for (const auto& [key, value] : dict) {
    const auto name = key.cast<std::string>();
    if (name == "id") continue;
    const auto given = py::array::ensure(value);
    if (!given) {
      fail("sample ", sample.id, " field '", name, "' is not array-like");
    }
    SampleField field;
    field.type = field_type_of(given.dtype(), sample.id, name);
    const py::array array = native_array(field.type, given);
    field.shape.assign(array.shape(), array.shape() + array.ndim());
    field.data.resize(static_cast<size_t>(array.nbytes()));
    if (array.nbytes() > 0) std::memcpy(field.data.data(), array.data(), field.data.size());
    sample.fields.emplace(name, std::move(field));
  }
  return sample;
}

/// A dict of numpy arrays taking over the sample's buffers (no copy).
py::dict multimodal_to_python(MultimodalSample&& sample) {
  py::dict out;
  out["id"] = sample.id;
  for (auto& [name, field] : sample.fields) {
    auto* owned = new std::vector<std::byte>(std::move(field.data));
    py::capsule owner(owned, [](void* p) { delete static_cast<std::vector<std::byte>*>(p); });
    const py::dtype dtype = dtype_of(field.type);
    std::vector<py::ssize_t> strides(field.shape.size());
    auto stride = static_cast<py::ssize_t>(field_type_size(field.type));
    for (size_t d = field.shape.size(); d-- > 0;) {
      strides[d] = stride;
      stride *= static_cast<py::ssize_t>(field.shape[d]);
    }
    const std::vector<py::ssize_t> shape(field.shape.begin(), field.shape.end());
    out[py::str(name)] = py::array(dtype, shape, strides, owned->data(), owner);
  }
  return out;
}

std::vector<std::vector<MultimodalSample>> shards_from_python(const py::sequence& shards,
                                                              int64_t first_position) {
  std::vector<std::vector<MultimodalSample>> out;
  out.reserve(shards.size());
  for (const auto& shard : shards) {
    const auto samples = shard.cast<py::sequence>();
    std::vector<MultimodalSample> converted;
    converted.reserve(samples.size());
    for (size_t j = 0; j < samples.size(); ++j) {
      converted.push_back(
          multimodal_from_python(samples[j], first_position + static_cast<int64_t>(j)));
    }
    out.push_back(std::move(converted));
  }
  return out;
}

py::dict stats_to_python(const ReorderWindowStats& s) {
  py::dict d;
  d["microbatches"] = s.microbatches;
  d["vision_cost_before"] = s.vision_cost_before;
  d["vision_cost_after"] = s.vision_cost_after;
  d["spread_before"] = s.spread_before;
  d["spread_after"] = s.spread_after;
  d["cost_spread_before"] = s.cost_spread_before;
  d["cost_spread_after"] = s.cost_spread_after;
  d["samples_moved"] = s.samples_moved;
  d["bytes_moved"] = s.bytes_moved;
  d["exchange_seconds"] = s.exchange_seconds;
  return d;
}

/// (microbatches: list[list[dict]], positions: list[np.int64], stats: dict)
py::tuple window_to_python(ReorderedWindow&& w) {
  py::list microbatches, positions;
  for (size_t k = 0; k < w.microbatches.size(); ++k) {
    py::list samples;
    for (auto& s : w.microbatches[k]) samples.append(multimodal_to_python(std::move(s)));
    microbatches.append(samples);
    positions.append(copy_of(std::span<const int64_t>(w.positions[k])));
  }
  return py::make_tuple(microbatches, positions, stats_to_python(w.stats));
}

AssignmentMethod method_from_name(const std::string& name) {
  if (name == "refined") return AssignmentMethod::kRefined;
  if (name == "longest_first" || name == "longest-first") return AssignmentMethod::kLongestFirst;
  fail("unknown assignment method '", name, "'; known methods: refined, longest_first");
}

// ---------------------------------------------------------------------------------------------
// The exchange, with its schema taken from the first sample it sees

class PyReorderExchange {
 public:
  PyReorderExchange(std::shared_ptr<Communicator> group, ReorderOptions options)
      : group_(std::move(group)), options_(std::move(options)) {
    validate(options_, group_->size());
    if (options_.module_dp_sizes.empty()) options_.module_dp_sizes = {group_->size()};
    groups_ = canonical_groups(options_.module_dp_sizes);
  }
  ~PyReorderExchange() {
    // A window in flight may need the GIL (Python communicators) to finish.
    if (impl_ && impl_->in_flight()) {
      py::gil_scoped_release release;
      impl_.reset();
    }
  }

  py::tuple exchange(const py::sequence& shards) {
    const Busy busy(busy_);
    auto converted = convert(shards);
    ReorderedWindow w;
    {
      py::gil_scoped_release release;
      w = impl_->exchange(std::move(converted));
    }
    return window_to_python(std::move(w));
  }
  void start(const py::sequence& shards) {
    const Busy busy(busy_);
    // Checked before converting: a conversion failure would otherwise report synchronously
    // while peers refuse start() locally.
    if (!group_->allows_other_threads()) {
      throw InvalidArgument(
          "ReorderExchange.start(): this communicator cannot be used from a background thread; "
          "use exchange()");
    }
    auto converted = convert(shards);
    py::gil_scoped_release release;
    impl_->start(std::move(converted));
  }
  py::tuple finish() {
    const Busy busy(busy_);
    if (!impl_) throw InvalidArgument("ReorderExchange.finish() without a start()");
    ReorderedWindow w;
    {
      py::gil_scoped_release release;
      w = impl_->finish();
    }
    return window_to_python(std::move(w));
  }
  bool in_flight() const { return impl_ && impl_->in_flight(); }
  int64_t groups() const { return groups_; }

 private:
  /// Marks the exchange in use for one call, checked under the GIL: a second Python thread
  /// calling in meanwhile gets an error instead of racing the first.
  class Busy {
   public:
    explicit Busy(bool& flag) : flag_(flag) {
      if (flag_) {
        throw InvalidArgument(
            "ReorderExchange: another thread is inside exchange(), start() or finish(); one "
            "exchange serves one thread");
      }
      flag_ = true;
    }
    ~Busy() { flag_ = false; }
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;

   private:
    bool& flag_;
  };

  /// The window as C++ samples. A window that fails to convert (or whose first sample cannot give
  /// the schema) is reported to every DP rank with ReorderExchange::fail, so peers already inside
  /// the collective raise InvalidArgument naming this rank; this rank raises the original error.
  std::vector<std::vector<MultimodalSample>> convert(const py::sequence& shards) {
    const GroupRange mine =
        shard_positions(options_.microbatch_size, group_->size(), group_->rank());
    std::exception_ptr failure;
    std::string error;
    try {
      auto converted = shards_from_python(shards, mine.begin);
      if (!impl_) {
        if (converted.empty() || converted.front().empty()) {
          throw InvalidArgument(
              "ReorderExchange: the first window has no samples to take the field schema from");
        }
        impl_ = std::make_unique<ReorderExchange>(*group_, schema_of(converted.front().front()),
                                                  options_);
      }
      return converted;
    } catch (const std::exception& e) {  // py::error_already_set included
      failure = std::current_exception();
      error = one_line_error(e);
    }
    if (error.empty()) error = "a window failed to convert";
    if (impl_ && impl_->in_flight()) std::rethrow_exception(failure);  // finish() that one first
    // A rank that fails before it has a schema takes part with a placeholder (the error is raised
    // before schemas are compared); the next window sets the real one.
    std::unique_ptr<ReorderExchange> stand_in;
    if (!impl_) {
      stand_in = std::make_unique<ReorderExchange>(*group_, placeholder_schema(), options_);
    }
    ReorderExchange& reporter = impl_ ? *impl_ : *stand_in;
    try {
      py::gil_scoped_release release;
      reporter.fail(error);
    } catch (const InvalidArgument&) {
      // Expected: every rank raised. Here the original error is the more useful one.
    }
    std::rethrow_exception(failure);
  }

  static SampleSchema placeholder_schema() {
    MultimodalSample s;
    s.fields.emplace(kInputIdsField, SampleField::of_int64({}));
    return schema_of(s);
  }

  std::shared_ptr<Communicator> group_;
  ReorderOptions options_;
  int64_t groups_ = 1;  // G, from the module DP sizes
  std::unique_ptr<ReorderExchange> impl_;
  bool busy_ = false;  // guarded by the GIL
};

// The per-sample cost: ReorderCost, image_patches, sample_cost.
void bind_reorder_cost(py::module_& m) {
  py::class_<ReorderCost>(m, "ReorderCost",
                          "cost = vision_weight * patches + text_weight * real_tokens, from "
                          "input_ids alone (patches = image placeholders * spatial_merge_size^2).")
      .def(py::init([](double vision_weight, double text_weight, int64_t image_token_id,
                       int64_t spatial_merge_size, int64_t pad_id) {
             ReorderCost c{vision_weight, text_weight, image_token_id, spatial_merge_size, pad_id};
             validate(c, false);
             return c;
           }),
           py::kw_only(), py::arg("vision_weight") = 1.0, py::arg("text_weight") = 0.0,
           py::arg("image_token_id") = -1, py::arg("spatial_merge_size") = 2, py::arg("pad_id") = 0)
      .def_readwrite("vision_weight", &ReorderCost::vision_weight)
      .def_readwrite("text_weight", &ReorderCost::text_weight)
      .def_readwrite("image_token_id", &ReorderCost::image_token_id)
      .def_readwrite("spatial_merge_size", &ReorderCost::spatial_merge_size)
      .def_readwrite("pad_id", &ReorderCost::pad_id);

  m.def(
      "image_patches",
      [](const py::handle& ids, const ReorderCost& c) {
        return image_patches(int64_values(ids, "input_ids"), c);
      },
      py::arg("input_ids"), py::arg("cost"));
  m.def(
      "sample_cost",
      [](const py::handle& ids, const ReorderCost& c) {
        return sample_cost(int64_values(ids, "input_ids"), c);
      },
      py::arg("input_ids"), py::arg("cost"));
}

// Canonical groups and which rank holds what: canonical_groups, owned_groups, shard_positions,
// assign_groups.
void bind_canonical_groups(py::module_& m) {
  m.def(
      "canonical_groups", [](const std::vector<int>& sizes) { return canonical_groups(sizes); },
      py::arg("module_dp_sizes"), "G = lcm of the module DP sizes.");
  m.def(
      "owned_groups",
      [](int64_t groups, int dp, int rank) {
        const GroupRange r = owned_groups(groups, dp, rank);
        return py::make_tuple(r.begin, r.end);
      },
      py::arg("groups"), py::arg("dp"), py::arg("rank"),
      "The canonical groups [begin, end) DP rank `rank` of a module of size `dp` holds.");
  m.def(
      "shard_positions",
      [](int64_t microbatch_size, int dp, int rank) {
        const GroupRange r = shard_positions(microbatch_size, dp, rank);
        return py::make_tuple(r.begin, r.end);
      },
      py::arg("microbatch_size"), py::arg("dp"), py::arg("rank"),
      "The positions [begin, end) DP rank `rank` reads before reordering.");

  py::class_<GroupAssignment>(m, "GroupAssignment", "Which positions form each canonical group.")
      .def_readonly("groups", &GroupAssignment::groups)
      .def_property_readonly("members",
                             [](const GroupAssignment& a) {
                               py::list out;
                               for (const auto& g : a.members) {
                                 out.append(copy_of(std::span<const int64_t>(g)));
                               }
                               return out;
                             })
      .def_property_readonly(
          "group_cost",
          [](const GroupAssignment& a) { return copy_of(std::span<const double>(a.group_cost)); })
      .def_property_readonly("group_of", [](const GroupAssignment& a) {
        return copy_of(std::span<const int64_t>(a.group_of));
      });
  m.def(
      "assign_groups",
      [](const Array<double>& costs, int64_t groups, const std::string& method, int64_t max_swaps) {
        return assign_groups(vector_of(costs, "costs"), groups,
                             AssignmentOptions{method_from_name(method), max_swaps});
      },
      py::arg("costs"), py::arg("groups"), py::kw_only(), py::arg("method") = "refined",
      py::arg("max_swaps") = 1000,
      "Assigns B = len(costs) samples to `groups` groups of B/groups: 'refined' (ours) or "
      "'longest_first' (the reference). Deterministic.");
}

// The synthetic vision-language workload and the language shard packer.
void bind_vision_language(py::module_& m) {
  py::class_<VisionLanguageWorkload>(m, "VisionLanguageWorkload",
                                     "A seeded synthetic vision-language workload.")
      .def(py::init<>())
      .def_readwrite("seed", &VisionLanguageWorkload::seed)
      .def_readwrite("text_only_fraction", &VisionLanguageWorkload::text_only_fraction)
      .def_readwrite("mean_images", &VisionLanguageWorkload::mean_images)
      .def_readwrite("max_images", &VisionLanguageWorkload::max_images)
      .def_readwrite("min_side", &VisionLanguageWorkload::min_side)
      .def_readwrite("max_side", &VisionLanguageWorkload::max_side)
      .def_readwrite("median_text_tokens", &VisionLanguageWorkload::median_text_tokens)
      .def_readwrite("pixel_dim", &VisionLanguageWorkload::pixel_dim)
      .def_readwrite("image_token_id", &VisionLanguageWorkload::image_token_id)
      .def_readwrite("spatial_merge_size", &VisionLanguageWorkload::spatial_merge_size);
  m.def(
      "vl_sample",
      [](const VisionLanguageWorkload& w, int64_t index) {
        return multimodal_to_python(vl_sample(w, index));
      },
      py::arg("workload"), py::arg("index"), "Sample `index` of the workload, as a dict.");
  m.def(
      "vl_cost",
      [](const VisionLanguageWorkload& w, double vision_weight, double text_weight) {
        return vl_cost(w, vision_weight, text_weight);
      },
      py::arg("workload"), py::kw_only(), py::arg("vision_weight") = 1.0,
      py::arg("text_weight") = 0.0);

  m.def(
      "pack_language_shard",
      [](const py::sequence& samples, int64_t pad_id, int64_t ignore_id, int64_t divisor) {
        const auto shards = shards_from_python(py::make_tuple(samples), 0);
        return std::make_shared<PackedBatch>(
            pack_language_shard(shards.front(), InBatchPackOptions{pad_id, ignore_id, divisor}));
      },
      py::arg("samples"), py::kw_only(), py::arg("pad_id") = 0, py::arg("ignore_id") = -100,
      py::arg("divisor") = 1,
      "One [1, T] THD row from a language shard (trailing pad ids dropped, HF 'labels' used when "
      "present).");
}

void bind_reorder_exchange(py::module_& m) {
  py::class_<PyReorderExchange>(
      m, "ReorderExchange",
      "Rebalances micro-batches across a DP group by per-sample cost: exchange(shards) "
      "synchronously, or start(shards) / finish() with the exchange in a background thread. "
      "shards[k] is this rank's B/dp samples of micro-batch k (dicts of arrays); results are "
      "(microbatches, positions, stats). Do not use the group for anything else while a window is "
      "in flight.")
      .def(py::init([](std::shared_ptr<Communicator> group, int64_t microbatch_size, int window,
                       const ReorderCost& cost, const std::string& method, int64_t max_swaps,
                       std::optional<std::vector<int>> module_dp_sizes, bool reorder,
                       bool check_vision, int64_t max_exchange_bytes) {
             ReorderOptions o;
             o.cost = cost;
             o.assignment = AssignmentOptions{method_from_name(method), max_swaps};
             o.module_dp_sizes = module_dp_sizes.value_or(std::vector<int>{});
             o.microbatch_size = microbatch_size;
             o.window = window;
             o.reorder = reorder;
             o.check_vision = check_vision;
             o.max_exchange_bytes = max_exchange_bytes;
             return std::make_unique<PyReorderExchange>(std::move(group), std::move(o));
           }),
           py::arg("group"), py::kw_only(), py::arg("microbatch_size"), py::arg("window") = 1,
           py::arg("cost") = ReorderCost{}, py::arg("method") = "refined",
           py::arg("max_swaps") = 1000, py::arg("module_dp_sizes") = py::none(),
           py::arg("reorder") = true, py::arg("check_vision") = true,
           py::arg("max_exchange_bytes") = ReorderOptions{}.max_exchange_bytes)
      .def("exchange", &PyReorderExchange::exchange, py::arg("shards"))
      .def("start", &PyReorderExchange::start, py::arg("shards"))
      .def("finish", &PyReorderExchange::finish)
      .def_property_readonly("in_flight", &PyReorderExchange::in_flight)
      .def_property_readonly("groups", &PyReorderExchange::groups);
}

}  // namespace

void bind_reorder(py::module_& m) {
  bind_reorder_cost(m);
  bind_canonical_groups(m);
  bind_vision_language(m);
  bind_reorder_exchange(m);
}

}  // namespace thdpack::python
