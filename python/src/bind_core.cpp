// Topology, cost model and FLOPs, datasets and workloads, global batches, schedulers and plans,
// offline bin packing.

#include <pybind11/functional.h>
#include <pybind11/numpy.h>

#include <limits>

#include "bindings.hpp"
#include "schedule/pack_splitting.hpp"
#include "strict_values.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/core/topology.hpp"
#include "thdpack/data/jsonl_dataset.hpp"
#include "thdpack/data/lengths_file.hpp"
#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/data/workloads.hpp"
#include "thdpack/packing/bin_packing.hpp"
#include "thdpack/schedule/cost_model.hpp"
#include "thdpack/schedule/global_batch.hpp"
#include "thdpack/schedule/plan_stats.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack::python {
namespace {

GroupKind group_kind(const std::string& name) {
  if (name == "tp") return GroupKind::kTp;
  if (name == "cp") return GroupKind::kCp;
  if (name == "dp") return GroupKind::kDp;
  if (name == "pp") return GroupKind::kPp;
  if (name == "dp_cp") return GroupKind::kDpCp;
  if (name == "ep") return GroupKind::kEp;
  fail("unknown group kind '", name, "'; use tp, cp, dp, pp, dp_cp or ep");
}

OversizePolicy oversize_of(const std::string& name) {
  if (name == "error") return OversizePolicy::kError;
  if (name == "truncate") return OversizePolicy::kTruncate;
  fail("oversize must be 'error' or 'truncate', got '", name, "'");
}

}  // namespace

py::object packs_to_python(Bins&& bins, bool flat) {
  if (flat) {
    return py::make_tuple(array_from(std::move(bins.items)), array_from(std::move(bins.offsets)));
  }
  py::list out;
  for (int64_t p = 0; p < bins.count(); ++p) out.append(copy_of(bins.bin(p)));
  return out;
}

namespace {

// Owns the arrays a ScheduleInput borrows.
struct OwnedInput {
  std::vector<int64_t> ids, lengths, per_rank, groups;
  ScheduleInput view() const { return {ids, lengths, per_rank, groups}; }
};

OwnedInput owned_input(const py::handle& padded_lengths, const py::object& ids,
                       const py::object& samples_per_rank, const py::object& group_ids) {
  OwnedInput in;
  in.lengths = int64_values(padded_lengths, "padded_lengths");
  if (ids.is_none()) {
    for (size_t i = 0; i < in.lengths.size(); ++i) in.ids.push_back(static_cast<int64_t>(i));
  } else {
    in.ids = int64_values(ids, "ids");
  }
  if (!samples_per_rank.is_none()) in.per_rank = int64_values(samples_per_rank, "samples_per_rank");
  if (!group_ids.is_none()) in.groups = int64_values(group_ids, "group_ids");
  return in;
}

ScheduleOptions schedule_options(int dp, int64_t max_seqlen, int cp, int pp, int multiple,
                                 const CostModel& cost) {
  ScheduleOptions o;
  o.dp = dp;
  o.cp = cp;
  o.pp = pp;
  o.microbatch_multiple = multiple;
  o.max_seqlen_per_dp_cp_rank = max_seqlen;
  o.cost = cost;
  return o;
}

py::dict stats_to_python(const PlanStats& s) {
  py::dict d;
  d["num_samples"] = s.num_samples;
  d["num_microbatches"] = s.num_microbatches;
  d["microbatch_token_bound"] = s.microbatch_token_bound;
  d["microbatch_lower_bound"] = s.microbatch_lower_bound;
  d["real_tokens"] = s.real_tokens;
  d["padded_tokens"] = s.padded_tokens;
  d["fill"] = s.fill;
  d["padding_fraction"] = s.padding_fraction;
  d["step_cost"] = s.step_cost;
  d["step_lower_bound"] = s.step_lower_bound;
  d["step_tight_bound"] = s.step_tight_bound;
  d["step_ratio"] = s.step_ratio;
  d["imbalance"] = s.imbalance;
  d["cap_violations"] = s.cap_violations;
  d["s1_real"] = s.sums.s1_real;
  d["s2_real"] = s.sums.s2_real;
  d["s1_padded"] = s.sums.s1_padded;
  d["s2_padded"] = s.sums.s2_padded;
  d["replica_step_costs"] = s.replica_step_costs;
  return d;
}

}  // namespace

namespace {

// Token ids are vocabulary indices: never negative. The common case (none is) is one pass that
// ORs the values, whose sign bit is set when some value is negative; it vectorises, where a loop
// that stops at the first negative value does not (a tenth of a step's CPU time on a million
// tokens).
void require_token_ids(std::span<const int64_t> ids, const char* name) {
  int64_t all = 0;
  for (const int64_t id : ids) all |= id;
  if (all >= 0) return;
  for (size_t i = 0; i < ids.size(); ++i) {
    check(ids[i] >= 0, name, "[", i, "] = ", ids[i], " is negative (token ids are >= 0)");
  }
}

// Present fields must be exactly as long as input_ids: an empty list is a mismatch, not "absent".
void require_length(const char* name, size_t got, size_t expected) {
  check(got == expected, name, " has ", got, " entries but input_ids has ", expected);
}

// A topology size: an integer (not a bool or float) within int; Topology checks the rest.
int int_size(py::handle value, const char* name) {
  const int64_t v = int64_value(value, name);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    fail(name, " = ", v, " is past 2^31-1");
  }
  return static_cast<int>(v);
}

// An array whose int64 elements can be read in place: 1-D, C-contiguous, aligned, native int64.
py::object borrowable_ids(py::handle value) {
  if (!py::isinstance<py::array>(value)) return {};
  const auto a = py::reinterpret_borrow<py::array>(value);
  if (a.ndim() != 1 || a.size() == 0 || !py::isinstance<py::array_t<int64_t>>(a) ||
      !(a.flags() & py::array::c_style) ||
      reinterpret_cast<uintptr_t>(a.data()) % alignof(int64_t) != 0) {
    return {};
  }
  return a;
}

// The sample's fields into `s`; input_ids in place into `ids` when `borrowed` is given and they
// can be read in place (see sample_view_from_python), else into s.input_ids.
void read_sample(py::handle object, int64_t ignore_id, Sample& s, py::object* borrowed,
                 std::span<const int64_t>& ids) {
  if (!py::isinstance<py::dict>(object)) {
    s.input_ids = int64_values(object, "sample");
    ids = s.input_ids;
    require_token_ids(ids, "sample");
    return;
  }
  const auto d = py::reinterpret_borrow<py::dict>(object);
  if (!d.contains("input_ids")) throw InvalidArgument("a sample dict needs 'input_ids'");
  bool has_mask = false, has_labels = false;
  for (const auto& [key, value] : d) {
    const std::string k = py::str(key);
    if (k == "input_ids") {
      py::object array = borrowed != nullptr ? borrowable_ids(value) : py::object();
      if (array) {
        const auto a = py::reinterpret_borrow<py::array_t<int64_t>>(array);
        ids = std::span<const int64_t>(a.data(), static_cast<size_t>(a.size()));
        *borrowed = std::move(array);
      } else {
        s.input_ids = int64_values(value, "input_ids");
        ids = s.input_ids;
      }
      require_token_ids(ids, "input_ids");
    } else if (k == "loss_mask") {
      has_mask = !value.is_none();
      if (has_mask) s.loss_mask = mask_values(value, "loss_mask");
    } else if (k == "labels") {
      has_labels = !value.is_none();
      if (has_labels) s.labels = int64_values(value, "labels");
    } else if (k == "id") {
      s.id = int64_value(value, "sample 'id'");
    } else if (k == "labels_shifted") {
      s.labels_shifted = bool_value(value, "labels_shifted");
    } else {
      fail("unknown sample key '", k,
           "'; expected input_ids, loss_mask, labels, labels_shifted, id");
    }
  }
  const std::string who = "sample " + std::to_string(s.id) + ": ";
  if (ids.empty()) fail(who, "input_ids is empty");
  // Unshifted labels already say which positions train (the ignore id); a mask beside them is
  // ambiguous. Shifted labels (Megatron's convention) come with Megatron's loss_mask.
  if (has_mask && has_labels && !s.labels_shifted) {
    fail(who,
         "give either loss_mask or labels, not both (both only with "
         "labels_shifted=True, Megatron's convention)");
  }
  try {
    if (has_mask) require_length("loss_mask", s.loss_mask.size(), ids.size());
    if (has_labels) require_length("labels", s.labels.size(), ids.size());
  } catch (const InvalidArgument& e) {
    fail(who, e.what());
  }
  // One pass that vectorises; the first bad label is looked for only when there is one.
  bool labels_valid = true;
  for (const int64_t label : s.labels) labels_valid &= (label >= 0) | (label == ignore_id);
  for (size_t i = 0; !labels_valid && i < s.labels.size(); ++i) {
    if (s.labels[i] < 0 && s.labels[i] != ignore_id) {
      fail(who, "labels[", i, "] = ", s.labels[i], " is negative and not the ignore id ",
           ignore_id);
    }
  }
}

/// Topology.
void bind_topology(py::module_& m) {
  py::class_<Topology>(m, "Topology",
                       "A parallel layout and its rank order (Megatron's by default).")
      .def(py::init([](py::handle tp, py::handle cp, py::handle dp, py::handle pp, py::handle ep,
                       py::handle vpp, py::handle vpp_group, const std::string& order) {
             return Topology({int_size(tp, "tp"), int_size(cp, "cp"), int_size(dp, "dp"),
                              int_size(pp, "pp"), int_size(ep, "ep"), int_size(vpp, "vpp"),
                              int_size(vpp_group, "vpp_group"), order});
           }),
           py::kw_only(), py::arg("tp") = 1, py::arg("cp") = 1, py::arg("dp") = 1,
           py::arg("pp") = 1, py::arg("ep") = 1, py::arg("vpp") = 1, py::arg("vpp_group") = 0,
           py::arg("order") = "tp-cp-ep-dp-pp")
      .def_property_readonly("tp", &Topology::tp)
      .def_property_readonly("cp", &Topology::cp)
      .def_property_readonly("dp", &Topology::dp)
      .def_property_readonly("pp", &Topology::pp)
      .def_property_readonly("ep", &Topology::ep)
      .def_property_readonly("vpp", &Topology::vpp)
      .def_property_readonly("order", [](const Topology& t) { return t.config().order; })
      .def_property_readonly("world_size", &Topology::world_size)
      .def_property_readonly("microbatch_multiple", &Topology::microbatch_multiple)
      .def(
          "coordinates",
          [](const Topology& t, int rank) {
            const Coordinates c = t.coordinates(rank);
            py::dict d;
            d["tp"] = c.tp;
            d["cp"] = c.cp;
            d["dp"] = c.dp;
            d["pp"] = c.pp;
            return d;
          },
          py::arg("rank"), "{'tp','cp','dp','pp'} of a global rank.")
      .def(
          "rank_of",
          [](const Topology& t, int tp, int cp, int dp, int pp) {
            return t.rank_of({tp, cp, dp, pp});
          },
          py::kw_only(), py::arg("tp") = 0, py::arg("cp") = 0, py::arg("dp") = 0, py::arg("pp") = 0)
      .def(
          "group_ranks",
          [](const Topology& t, const std::string& kind, int rank) {
            return t.group_ranks(group_kind(kind), rank);
          },
          py::arg("kind"), py::arg("rank"),
          "Global ranks of the group of `kind` (tp, cp, dp, pp, dp_cp, ep) holding `rank`.")
      .def(
          "all_groups",
          [](const Topology& t, const std::string& kind) { return t.all_groups(group_kind(kind)); },
          py::arg("kind"))
      .def("check_world_size", &Topology::check_world_size, py::arg("world_size"))
      .def("__repr__", [](const Topology& t) { return "Topology(" + t.describe() + ")"; });
}

/// Model, cost, FLOPs.
void bind_costs(py::module_& m) {
  py::class_<ModelSpec>(m, "ModelSpec", "Shape of a decoder-only transformer.")
      .def(py::init([](std::string name, int64_t hidden, int64_t layers, int64_t heads,
                       int64_t kv_heads, int64_t head_dim, int64_t ffn, int64_t vocab, bool swiglu,
                       int64_t moe_topk) {
             return ModelSpec{std::move(name), hidden, layers, heads,  kv_heads,
                              head_dim,        ffn,    vocab,  swiglu, moe_topk};
           }),
           py::kw_only(), py::arg("name") = "custom", py::arg("hidden"), py::arg("layers"),
           py::arg("heads"), py::arg("kv_heads"), py::arg("head_dim"), py::arg("ffn"),
           py::arg("vocab"), py::arg("swiglu") = true, py::arg("moe_topk") = 1)
      .def_readonly("name", &ModelSpec::name)
      .def_readonly("hidden", &ModelSpec::hidden)
      .def_readonly("layers", &ModelSpec::layers)
      .def_readonly("heads", &ModelSpec::heads)
      .def_readonly("kv_heads", &ModelSpec::kv_heads)
      .def_readonly("head_dim", &ModelSpec::head_dim)
      .def_readonly("ffn", &ModelSpec::ffn)
      .def_readonly("vocab", &ModelSpec::vocab)
      .def_readonly("swiglu", &ModelSpec::swiglu)
      .def_readonly("moe_topk", &ModelSpec::moe_topk);
  m.def("model_preset_names", &model_preset_names);
  m.def("model_preset", &model_preset, py::arg("name"));
  m.def("training_flops", &training_flops, py::arg("model"), py::arg("s1"), py::arg("s2"),
        "Training FLOPs (3x forward) of samples with sum of lengths s1 and of squared lengths s2.");
  py::class_<CostModel>(m, "CostModel", "cost(L) = linear * L + quadratic * L^2")
      .def(py::init(&CostModel::from_coefficients), py::kw_only(), py::arg("linear") = 1.0,
           py::arg("quadratic") = 0.0)
      .def_static("from_model", py::overload_cast<const ModelSpec&>(&CostModel::from_model),
                  py::arg("model"))
      .def_readonly("linear", &CostModel::linear)
      .def_readonly("quadratic", &CostModel::quadratic)
      .def("cost", &CostModel::cost, py::arg("length"));
}

/// Datasets.
void bind_mock_datasets(py::module_& m) {
  py::class_<Dataset, std::shared_ptr<Dataset>>(m, "Dataset", "Random-access samples.")
      .def("__len__", &Dataset::size)
      .def_property_readonly("size", &Dataset::size)
      .def("length", &Dataset::length, py::arg("index"))
      .def(
          "lengths",
          [](const Dataset& d, int64_t start, int64_t stop) {
            check(0 <= start && start <= stop && stop <= d.size(), "lengths(start, stop) needs ",
                  "0 <= start <= stop <= ", d.size(), " (the dataset's size), got (", start, ", ",
                  stop, ")");
            py::array_t<int64_t> out(stop - start);
            auto* p = out.mutable_data();
            for (int64_t i = start; i < stop; ++i) p[i - start] = d.length(i);
            return out;
          },
          py::arg("start"), py::arg("stop"), "Lengths of samples [start, stop).")
      .def(
          "sample", [](const Dataset& d, int64_t i) { return sample_to_python(d.sample(i)); },
          py::arg("index"), "A dict of numpy arrays: id, input_ids, and loss_mask / labels.")
      .def(
          "samples",
          [](const Dataset& d, const std::vector<int64_t>& indices) {
            std::vector<Sample> read;
            {
              const py::gil_scoped_release unlocked;
              read = d.samples(indices);
            }
            py::list out;
            for (const Sample& s : read) out.append(sample_to_python(s));
            return out;
          },
          py::arg("indices"),
          "The samples `indices` (any order, repeats allowed) as sample() gives them, read "
          "together: a Parquet or Arrow source reads each row group they need once.")
      .def("describe", &Dataset::describe)
      .def("__repr__", &Dataset::describe);
  m.def(
      "mock_dataset",
      [](const std::string& config_json, const py::object& base_dir) {
        return std::shared_ptr<Dataset>(make_mock_dataset(
            parse_mock_config(config_json, path_from_python(base_dir, "base_dir"))));
      },
      py::arg("config_json"), py::arg("base_dir") = "",
      "A mock dataset from a config JSON with Megatron's keys (mode, type, min_seq_len, ...).");
  m.def(
      "default_mock_config", [](int64_t s) { return to_json(default_mock_config(s)); },
      py::arg("seq_length"), "Megatron's default mock config for sequence length S, as JSON.");
  m.def(
      "load_jsonl_dataset",
      [](const py::object& path, bool ignore_unknown_keys, bool labels_shifted) {
        return std::shared_ptr<Dataset>(load_jsonl_dataset(
            path_from_python(path), JsonlOptions{ignore_unknown_keys, labels_shifted}));
      },
      py::arg("path"), py::kw_only(), py::arg("ignore_unknown_keys") = false,
      py::arg("labels_shifted") = false);
  m.def(
      "read_lengths_file",
      [](const py::object& p) {
        auto v = read_lengths_file(path_from_python(p));
        return copy_of(std::span<const int64_t>(v));
      },
      py::arg("path"));
  m.def("workload_names", &workload_names);
  m.def(
      "workload",
      [](const std::string& name) {
        const Workload w = workload(name);
        py::dict d;
        d["name"] = w.name;
        d["description"] = w.description;
        d["dataset_config"] = to_json(w.dataset);
        d["max_seqlen_per_dp_cp_rank"] = w.max_seqlen_per_dp_cp_rank;
        d["cp"] = w.cp;
        d["reference_batches"] = w.reference_batches;
        return d;
      },
      py::arg("name"));
  m.def(
      "default_global_batch",
      [](const std::string& name, int dp) { return default_global_batch(workload(name), dp); },
      py::arg("workload"), py::arg("dp"));
}

/// Global batches.
void bind_global_batches(py::module_& m) {
  py::class_<GlobalBatch>(m, "GlobalBatch", "The lengths of one global batch, DP-rank-major.")
      .def_property_readonly(
          "ids", [](py::object self) { return view_of(self.cast<const GlobalBatch&>().ids, self); })
      .def_property_readonly("real_lengths",
                             [](py::object self) {
                               return view_of(self.cast<const GlobalBatch&>().real_lengths, self);
                             })
      .def_property_readonly("padded_lengths",
                             [](py::object self) {
                               return view_of(self.cast<const GlobalBatch&>().padded_lengths, self);
                             })
      .def_property_readonly("samples_per_rank",
                             [](py::object self) {
                               return view_of(self.cast<const GlobalBatch&>().samples_per_rank,
                                              self);
                             })
      .def_property_readonly(
          "group_ids",
          [](py::object self) { return view_of(self.cast<const GlobalBatch&>().group_ids, self); },
          "Empty, or each sample's group (samples without one: -(1 + position)).")
      .def_readonly("truncated", &GlobalBatch::truncated)
      .def_readonly("samples_carry_targets", &GlobalBatch::samples_carry_targets,
                    "Whether some sample may carry its own labels or loss mask; where not, the "
                    "exchange moves tokens alone.")
      .def("__len__", [](const GlobalBatch& b) { return b.ids.size(); });
  m.def(
      "global_batch_indices",
      [](int64_t step, int64_t batch, int64_t size, int dp, const std::string& order) {
        auto v = global_batch_indices(step, batch, size);
        if (dp > 0) v = rank_major_indices(std::move(v), dp, parse_sample_order(order));
        return copy_of(std::span<const int64_t>(v));
      },
      py::arg("step"), py::arg("global_batch"), py::arg("dataset_size"), py::kw_only(),
      py::arg("dp") = 0, py::arg("order") = "contiguous",
      "Dataset indices of global batch `step`; with dp > 0, in DP-rank-major order for the sample "
      "order ('contiguous' or 'megatron': rank r holds positions r, r + dp, ...).");
  m.def(
      "make_global_batch",
      [](const Dataset& d, int64_t step, int64_t global_batch, int dp, int64_t divisor,
         int64_t capacity, const std::string& oversize, const std::string& order) {
        return make_global_batch(d, step,
                                 {global_batch, dp, divisor, capacity, oversize_of(oversize),
                                  parse_sample_order(order)});
      },
      py::arg("dataset"), py::arg("step"), py::kw_only(), py::arg("global_batch"), py::arg("dp"),
      py::arg("divisor") = 1, py::arg("capacity"), py::arg("oversize") = "error",
      py::arg("order") = "contiguous");
}

/// Schedulers and plans.
// Plan: one plan type for every scheduler.
void bind_plan(py::module_& m) {
  py::class_<Plan>(m, "Plan",
                   "One global batch's plan, for every scheduler: micro-batches of CP groups "
                   "(first_rank, size, ids) over the dp*cp ranks. With fixed CP, group r of "
                   "micro-batch k is the pack of DP replica r (pack(k, r)).")
      .def_property_readonly("dp", &Plan::dp)
      .def_property_readonly("cp", &Plan::cp)
      .def_property_readonly("ranks", &Plan::ranks)
      .def_property_readonly("is_fixed_cp", &Plan::is_fixed_cp)
      .def("groups", &plan_groups_to_python,
           "plan.groups()[k] = [(first_rank, size, ids), ...]: micro-batch k's CP groups in rank "
           "order.")
      .def_property_readonly("num_microbatches", &Plan::num_microbatches)
      .def_property_readonly("num_packs", &Plan::num_packs)
      .def(
          "pack", [](const Plan& p, int64_t k, int r) { return copy_of(p.pack(k, r)); },
          py::arg("microbatch"), py::arg("replica"))
      .def(
          "to_list",
          [](const Plan& p) {
            std::vector<std::vector<std::vector<int64_t>>> out(
                static_cast<size_t>(p.num_microbatches()));
            for (int64_t k = 0; k < p.num_microbatches(); ++k) {
              for (const CpGroupView g : p.microbatch(k)) {
                out[static_cast<size_t>(k)].emplace_back(g.ids.begin(), g.ids.end());
              }
            }
            return out;
          },
          "plan[k][g] = ids of group g of micro-batch k (with fixed CP: of DP replica g).")
      .def("__eq__", [](const Plan& a, const Plan& b) { return a == b; });
}

// The schedulers and a plan's figures: scheduler_names, schedule, evaluate_plan.
void bind_scheduling(py::module_& m) {
  bind_plan(m);
  m.def(
      "scheduler_names",
      [](const py::object& layout) {
        if (layout.is_none()) return scheduler_names();
        const auto name = layout.cast<std::string>();
        if (name == "fixed") return scheduler_names(CpLayout::kFixed);
        if (name == "dynamic") return scheduler_names(CpLayout::kDynamic);
        fail("layout must be 'fixed', 'dynamic' or None, not '", name, "'");
      },
      py::arg("layout") = py::none(),
      "Every scheduler's name, or those of one layout: 'fixed' (fixed CP) or 'dynamic' "
      "(dynamic CP).");
  m.def(
      "schedule",
      [](const py::handle& padded_lengths, int dp, int64_t max_seqlen, const std::string& name,
         int cp, int pp, int multiple, const py::object& cost, const py::object& ids,
         const py::object& samples_per_rank, const py::object& group_ids,
         int64_t max_sequences_per_pack, int min_cp, const py::object& model, double gpu_tflops,
         double cp_link_gbps, double cp_step_overhead_us) {
        const OwnedInput in = owned_input(padded_lengths, ids, samples_per_rank, group_ids);
        const std::string preset = model.is_none() ? "" : model.cast<std::string>();
        const CostModel per_sample =
            !cost.is_none()
                ? cost.cast<CostModel>()
                : (preset.empty() ? CostModel{} : CostModel::from_model(model_preset(preset)));
        ScheduleOptions o = schedule_options(dp, max_seqlen, cp, pp, multiple, per_sample);
        o.max_sequences_per_pack = max_sequences_per_pack;
        const auto scheduler = make_scheduler(name);
        if (scheduler->layout() == CpLayout::kDynamic) {
          o.min_cp = min_cp;
          o.cost = CostModel::of_preset_or_coefficients(preset, per_sample, gpu_tflops,
                                                        cp_link_gbps, cp_step_overhead_us);
        }
        py::gil_scoped_release release;
        return scheduler->schedule(in.view(), o);
      },
      py::arg("padded_lengths"), py::kw_only(), py::arg("dp"), py::arg("max_seqlen_per_dp_cp_rank"),
      py::arg("scheduler") = "balanced", py::arg("cp") = 1, py::arg("pp") = 1,
      py::arg("microbatch_multiple") = 1, py::arg("cost") = py::none(), py::arg("ids") = py::none(),
      py::arg("samples_per_rank") = py::none(), py::arg("group_ids") = py::none(),
      py::arg("max_sequences_per_pack") = 0, py::arg("min_cp") = 1, py::arg("model") = py::none(),
      py::arg("gpu_tflops") = kDefaultGpuTflops, py::arg("cp_link_gbps") = kDefaultCpLinkGBps,
      py::arg("cp_step_overhead_us") = kDefaultCpStepOverheadUs,
      "Plans one global batch (no communication) with any scheduler, fixed or dynamic CP; ids "
      "default to positions. max_sequences_per_pack > 0 caps the samples of one pack. cost "
      "defaults to the model preset's FLOPs (or tokens). With a dynamic-CP scheduler, min_cp is "
      "the smallest CP group, and the CP cost model is the one the pipeline and `thdpack plan` "
      "use: the preset's at gpu_tflops with cp_link_gbps and cp_step_overhead_us, or cost's "
      "coefficients at gpu_tflops (compute only).");
  m.def(
      "evaluate_plan",
      [](const Plan& plan, const py::handle& padded_lengths, int64_t max_seqlen, int cp, int pp,
         const CostModel& cost, const py::object& ids, const py::object& real_lengths) {
        const OwnedInput in = owned_input(padded_lengths, ids, py::none(), py::none());
        std::vector<int64_t> real;
        if (!real_lengths.is_none()) real = int64_values(real_lengths, "real_lengths");
        const ScheduleOptions o = schedule_options(plan.dp(), max_seqlen, cp, pp, 1, cost);
        return stats_to_python(evaluate_plan(plan, in.view(), real, o));
      },
      py::arg("plan"), py::arg("padded_lengths"), py::kw_only(),
      py::arg("max_seqlen_per_dp_cp_rank"), py::arg("cp") = 1, py::arg("pp") = 1,
      py::arg("cost") = CostModel{}, py::arg("ids") = py::none(),
      py::arg("real_lengths") = py::none());
}

/// For thdpack.rl, which deals whole groups itself: the schedulers' own pack splitter.
void bind_pack_splitting(py::module_& m) {
  m.def(
      "_split_item_packs_to",
      [](std::vector<std::vector<std::vector<int64_t>>> packs, int64_t target,
         const std::vector<double>& cost, const std::vector<bool>& in_run) {
        const std::vector<char> runs(in_run.begin(), in_run.end());
        for (const auto& pack : packs) {
          for (const auto& item : pack) {
            check(!item.empty(), "an item of a pack is empty");
            for (int64_t p : item) {
              check(p >= 0 && static_cast<size_t>(p) < cost.size() && p < std::ssize(runs),
                    "position ", p, " outside the ", cost.size(), " costs");
            }
          }
        }
        return detail::split_item_packs_to(std::move(packs), target, cost, runs);
      },
      py::arg("packs"), py::arg("target"), py::arg("cost"), py::arg("in_run"),
      "One replica's packs of items (input positions that stay together) split until there are "
      "target, as the schedulers split them; fewer when no pack has two items left.");
}

/// Offline bin packing.
void bind_bin_packing(py::module_& m) {
  m.def(
      "best_fit_decreasing",
      [](const py::handle& l, int64_t c, bool flat) {
        auto v = int64_values(l, "lengths");
        Bins b;
        {
          py::gil_scoped_release r;
          b = best_fit_decreasing(v, c);
        }
        return packs_to_python(std::move(b), flat);
      },
      py::arg("lengths"), py::arg("capacity"), py::kw_only(), py::arg("flat") = false,
      "Packs as a list of item-index arrays, or with flat=True as (items, offsets): pack p is "
      "items[offsets[p]:offsets[p+1]].");
  m.def(
      "first_fit_decreasing",
      [](const py::handle& l, int64_t c, bool flat) {
        auto v = int64_values(l, "lengths");
        Bins b;
        {
          py::gil_scoped_release r;
          b = first_fit_decreasing(v, c);
        }
        return packs_to_python(std::move(b), flat);
      },
      py::arg("lengths"), py::arg("capacity"), py::kw_only(), py::arg("flat") = false);
  m.def(
      "next_fit",
      [](const py::handle& l, int64_t c, bool flat) {
        return packs_to_python(next_fit(int64_values(l, "lengths"), c), flat);
      },
      py::arg("lengths"), py::arg("capacity"), py::kw_only(), py::arg("flat") = false);
  m.def(
      "bins_lower_bound_l1",
      [](const py::handle& l, int64_t c) {
        return bins_lower_bound_l1(int64_values(l, "lengths"), c);
      },
      py::arg("lengths"), py::arg("capacity"));
  m.def(
      "bins_lower_bound_l2",
      [](const py::handle& l, int64_t c) {
        return bins_lower_bound_l2(int64_values(l, "lengths"), c);
      },
      py::arg("lengths"), py::arg("capacity"));
}

}  // namespace

std::string path_from_python(py::handle path, const char* what) {
  const py::module_ os = py::module_::import("os");
  if (!py::isinstance<py::str>(path) && !py::isinstance<py::bytes>(path) &&
      !py::isinstance(path, os.attr("PathLike"))) {
    throw InvalidArgument(
        message(what, " must be a str, bytes or os.PathLike (pathlib.Path), not ",
                py::str(py::type::handle_of(path).attr("__name__")).cast<std::string>()));
  }
  return os.attr("fsencode")(path).cast<std::string>();
}

Sample sample_from_python(py::handle object, int64_t default_id, int64_t ignore_id) {
  Sample s;
  s.id = default_id;
  std::span<const int64_t> ids;
  read_sample(object, ignore_id, s, nullptr, ids);
  return s;
}

SampleView sample_view_from_python(py::handle object, int64_t ignore_id, Sample& storage,
                                   py::object& borrowed) {
  std::span<const int64_t> ids;
  read_sample(object, ignore_id, storage, &borrowed, ids);
  SampleView view = view_of(storage);
  view.input_ids = ids;
  return view;
}

py::dict sample_to_python(const Sample& s) {
  py::dict d;
  d["id"] = s.id;
  d["input_ids"] = copy_of(std::span<const int64_t>(s.input_ids));
  if (!s.loss_mask.empty()) d["loss_mask"] = copy_of(std::span<const float>(s.loss_mask));
  if (!s.labels.empty()) {
    d["labels"] = copy_of(std::span<const int64_t>(s.labels));
    // Packing the dict again must read the labels the same way (shifting twice is wrong).
    d["labels_shifted"] = s.labels_shifted;
  }
  return d;
}

void bind_core(py::module_& m) {
  // In this order: later bindings take earlier types as defaults.
  bind_topology(m);
  bind_costs(m);
  bind_mock_datasets(m);
  bind_global_batches(m);
  bind_scheduling(m);
  bind_pack_splitting(m);
  bind_bin_packing(m);
}

}  // namespace thdpack::python
