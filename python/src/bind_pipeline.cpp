// The distributed pipeline for Python: options, steps with their micro-batches as numpy views,
// the pieces that work on their own, and verification.

#include <pybind11/functional.h>

#include <deque>
#include <optional>

#include "bindings.hpp"
#include "strict_values.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/pipeline/option_fields.hpp"
#include "thdpack/pipeline/pipeline.hpp"
#include "thdpack/pipeline/step_verification.hpp"
#include "thdpack/schedule/plan_file.hpp"

namespace thdpack::python {
namespace {

ReadingMode reading_of(const std::string& name) {
  if (name == "megatron") return ReadingMode::kMegatron;
  if (name == "all-ranks" || name == "all_ranks") return ReadingMode::kAllRanks;
  fail("reading must be 'megatron' or 'all-ranks', got '", name, "'");
}

void require_pipeline_sample(py::handle s) {
  if (!py::isinstance<py::dict>(s) || !py::reinterpret_borrow<py::dict>(s).contains("id")) {
    throw InvalidArgument("pipeline samples must be dicts with a global 'id' and 'input_ids'");
  }
}

std::vector<Sample> samples_of(const py::sequence& samples, int64_t ignore_id) {
  std::vector<Sample> out;
  out.reserve(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    const py::handle s = samples[i];
    require_pipeline_sample(s);
    out.push_back(sample_from_python(s, 0, ignore_id));
  }
  return out;
}

// This rank's samples for run_step, their input_ids read in place where they allow it (see
// sample_view_from_python). Destroyed with the GIL held (it holds Python references).
struct BorrowedSamples {
  std::vector<SampleView> views;
  std::deque<Sample> storage;      // stable addresses for the views
  std::vector<py::object> arrays;  // the arrays the views read

  BorrowedSamples(const py::sequence& samples, int64_t ignore_id) {
    views.reserve(samples.size());
    for (size_t i = 0; i < samples.size(); ++i) {
      const py::handle s = samples[i];
      require_pipeline_sample(s);
      py::object array;
      views.push_back(sample_view_from_python(s, ignore_id, storage.emplace_back(), array));
      if (array) arrays.push_back(std::move(array));
    }
  }
};

// sample_of for C++ code running without the GIL.
std::function<Sample(int64_t)> sample_callback(const py::function& sample_of, int64_t ignore_id) {
  return [sample_of, ignore_id](int64_t id) {
    py::gil_scoped_acquire gil;
    return sample_from_python(sample_of(id), id, ignore_id);
  };
}

py::dict fields_dict(StageFields f) {
  py::dict d;
  d["tokens"] = f.tokens;
  d["labels"] = f.labels;
  return d;
}

// Pipeline plus the Python communicators it borrows (kept alive with it).
struct PyPipeline {
  std::shared_ptr<Communicator> world, dp, tp;
  std::unique_ptr<Pipeline> pipeline;
};

std::string kind_name(OptionField::Kind kind) {
  switch (kind) {
    case OptionField::Kind::kInteger:
      return "integer";
    case OptionField::Kind::kNumber:
      return "number";
    case OptionField::Kind::kFlag:
      return "flag";
    case OptionField::Kind::kCost:
      return "cost";
    case OptionField::Kind::kText:
      break;
  }
  return "text";
}

// One keyword of PipelineOptions(...): checked against the field's kind (TypeError, as for any
// argument of the wrong type), then set through the options table (InvalidArgument on a value
// the field does not take).
void set_option(PipelineOptions& o, const std::string& name, const py::handle& value) {
  const OptionField* field = nullptr;
  for (const OptionField& f : pipeline_option_fields()) {
    if (f.name == name && f.set) field = &f;
  }
  if (field == nullptr) {
    std::string names;
    for (const OptionField& f : pipeline_option_fields()) {
      if (f.set) names += (names.empty() ? "" : ", ") + f.name;
    }
    throw py::type_error(message("PipelineOptions() got an unexpected keyword argument '", name,
                                 "' (it takes topology and ", names, ")"));
  }
  const bool is_bool = py::isinstance<py::bool_>(value);
  auto wrong = [&](const char* wanted) {
    throw py::type_error(message("PipelineOptions: ", name, " must be ", wanted, ", not ",
                                 std::string(py::str(py::type::of(value).attr("__name__")))));
  };
  switch (field->kind) {
    case OptionField::Kind::kCost:
      if (!py::isinstance<CostModel>(value)) wrong("a CostModel");
      o.cost = value.cast<CostModel>();
      return;
    case OptionField::Kind::kInteger:
      if (is_bool || !py::isinstance<py::int_>(value)) wrong("an int");
      break;
    case OptionField::Kind::kNumber:
      if (is_bool || !(py::isinstance<py::int_>(value) || py::isinstance<py::float_>(value))) {
        wrong("a number");
      }
      break;
    case OptionField::Kind::kFlag:
      if (!is_bool) wrong("a bool");
      field->set(o, value.cast<bool>() ? "1" : "0");
      return;
    case OptionField::Kind::kText:
      if (!py::isinstance<py::str>(value)) wrong("a str");
      break;
  }
  field->set(o, std::string(py::str(value)));
}

/// The pipeline options (PipelineOptions).
void bind_pipeline_options(py::module_& m) {
  py::class_<PipelineOptions>(m, "PipelineOptions",
                              "The pipeline's options: topology, max_seqlen_per_dp_cp_rank and "
                              "every field of PipelineOptions.fields() as a keyword.")
      .def(py::init([](const Topology& topology, const py::kwargs& options) {
             PipelineOptions o;
             o.topology = topology;
             for (const OptionField& f : pipeline_option_fields()) {
               if (f.required && !options.contains(f.name)) {
                 throw py::type_error("PipelineOptions() missing required keyword argument '" +
                                      f.name + "'");
               }
             }
             for (const auto& [key, value] : options) set_option(o, key.cast<std::string>(), value);
             return o;
           }),
           py::kw_only(), py::arg("topology"))
      .def_static(
          "fields",
          [] {
            const PipelineOptions defaults;
            py::list out;
            for (const OptionField& f : pipeline_option_fields()) {
              py::dict d;
              d["name"] = f.name;
              d["kind"] = kind_name(f.kind);
              d["doc"] = f.doc;
              d["cli_flag"] = f.cli_flag;
              d["default"] = f.text(defaults);
              d["settable"] = static_cast<bool>(f.set);
              d["required"] = f.required;
              out.append(d);
            }
            return out;
          },
          "Every field (describe() order) as a dict: name, kind (integer, number, flag, text, "
          "cost), doc, cli_flag (the `thdpack run` flag), default (as text), settable (False "
          "for the topology's fields, which `topology` sets) and required.")
      .def_readonly("topology", &PipelineOptions::topology)
      .def_readonly("max_seqlen_per_dp_cp_rank", &PipelineOptions::max_seqlen_per_dp_cp_rank)
      .def_readonly("scheduler", &PipelineOptions::scheduler)
      .def("describe", &PipelineOptions::describe)
      .def("__repr__",
           [](const PipelineOptions& o) { return "PipelineOptions(" + o.describe() + ")"; });
}

/// What a step returns (StepResult).
void bind_step_result(py::module_& m) {
  py::class_<StepResult>(m, "StepResult", "This rank's share of one global batch.")
      .def_readonly("batch", &StepResult::batch)
      .def_readonly("plan", &StepResult::plan)
      .def_readonly("dynamic_cp", &StepResult::dynamic_cp)
      .def_property_readonly("num_microbatches", &StepResult::num_microbatches)
      .def_property_readonly(
          "microbatches",
          [](const StepResult& r) {
            // Aliasing pointers keep the step's storage alive for as long as any view of it.
            std::vector<std::shared_ptr<PackedBatch>> out;
            auto& all = const_cast<std::vector<PackedBatch>&>(*r.microbatches);
            const auto owner = std::const_pointer_cast<std::vector<PackedBatch>>(r.microbatches);
            for (auto& m : all) out.emplace_back(owner, &m);
            return out;
          },
          "This rank's micro-batches in order, with its stage's fields (others are empty).")
      .def_property_readonly("sums",
                             [](const StepResult& r) {
                               py::dict d;
                               d["s1_real"] = r.sums.s1_real;
                               d["s2_real"] = r.sums.s2_real;
                               d["s1_padded"] = r.sums.s1_padded;
                               d["s2_padded"] = r.sums.s2_padded;
                               return d;
                             })
      .def_property_readonly("traffic",
                             [](const StepResult& r) {
                               py::dict d;
                               d["collectives"] = r.traffic.collectives;
                               d["bytes_sent"] = r.traffic.bytes_sent;
                               d["exchange_bytes"] = r.traffic.exchange_bytes;
                               d["broadcast_bytes"] = r.traffic.broadcast_bytes;
                               d["seconds"] = r.traffic.seconds;
                               return d;
                             })
      .def_property_readonly(
          "dynamic_cp_plan",
          [](const StepResult& r) -> py::object {
            if (!r.dynamic_cp) return py::none();
            return plan_groups_to_python(r.plan);
          },
          "With a dynamic-CP scheduler, plan[k] = [(first dp_cp index, size, [ids...]), ...] for "
          "micro-batch k; None with a fixed-CP scheduler.")
      .def_property_readonly(
          "cp_groups",
          [](const StepResult& r) {
            py::list out;
            for (const MicrobatchCpGroup& g : r.cp_groups) {
              py::dict d;
              d["local_cp_size"] = g.local_cp_size;
              d["cp_rank"] = g.cp_rank;
              d["member_ranks"] = g.member_ranks;
              d["first_dp_cp_index"] = g.first_dp_cp_index;
              out.append(d);
            }
            return out;
          },
          "One dict per micro-batch: this rank's CP group (local_cp_size, cp_rank = its position "
          "in the group, member_ranks = the members' global ranks in group order, "
          "first_dp_cp_index). With fixed CP the rank's CP group every time.")
      .def_property_readonly("virtual_stages", [](const StepResult& r) {
        py::list out;
        for (StageFields f : r.virtual_stages) out.append(fields_dict(f));
        return out;
      });
}

/// Plans made elsewhere: PlannedBatch and plan files.
void bind_planned_batches(py::module_& m) {
  py::class_<PlannedBatch>(
      m, "PlannedBatch",
      "A plan with the samples it was made for (ids and padded lengths in gathered order): what a "
      "driver hands to the ranks (Pipeline.run_step(plan=), ThdPacker.step(plan=)).")
      .def(py::init([](const std::string& scheduler, const py::object& ids,
                       const py::object& padded_lengths, const Plan& plan) {
             return PlannedBatch{scheduler, int64_values(ids, "ids"),
                                 int64_values(padded_lengths, "padded_lengths"), plan};
           }),
           py::kw_only(), py::arg("scheduler"), py::arg("ids"), py::arg("padded_lengths"),
           py::arg("plan"))
      .def_readonly("scheduler", &PlannedBatch::scheduler)
      .def_readonly("ids", &PlannedBatch::ids)
      .def_readonly("padded_lengths", &PlannedBatch::padded_lengths)
      .def_readonly("plan", &PlannedBatch::plan)
      .def("to_json", &planned_batch_json, "The planned batch as JSON text (plan_file.hpp).")
      .def_static("from_json", &planned_batch_from_json, py::arg("text"),
                  "Reads to_json's text; raises InvalidArgument saying what is malformed.")
      .def("__eq__", [](const PlannedBatch& a, const PlannedBatch& b) { return a == b; });
  m.def(
      "read_plan_file",
      [](const py::object& path) {
        py::list steps;
        for (const PlanFileStep& step : read_plan_file(path_from_python(path))) {
          py::dict plans;
          for (const auto& [name, planned] : step.plans) plans[py::str(name)] = planned;
          steps.append(plans);
        }
        return steps;
      },
      py::arg("path"),
      "A plan file (`thdpack plan --plan-out`) as a list with one dict per step: "
      "{scheduler: PlannedBatch}.");
  m.def(
      "planned_batch",
      [](const StepResult& r, const std::string& scheduler) {
        return PlannedBatch{scheduler, r.batch.ids, r.batch.padded_lengths, r.plan};
      },
      py::arg("result"), py::arg("scheduler"),
      "The PlannedBatch of a step's result (its gathered ids and lengths and its plan), to hand "
      "to other ranks or a later run.");
}

/// The pipeline itself.
// Pipeline.run_step. Every argument is converted here, where a failure reaches the peers already
// waiting in this step, not by pybind11 before the call (a TypeError on this rank alone).
auto run_step_from_python(PyPipeline& p, const py::object& samples, const py::object& group_ids,
                          const py::object& plan) {
  std::optional<BorrowedSamples> local;
  std::vector<int64_t> groups;
  std::optional<PlannedBatch> planned;
  auto type_name = [](const py::object& o) {
    return std::string(py::str(py::type::of(o).attr("__name__")));
  };
  try {
    if (!py::isinstance<py::sequence>(samples) || py::isinstance<py::str>(samples)) {
      fail("local_samples must be a sequence of sample dicts, not ", type_name(samples));
    }
    local.emplace(samples.cast<py::sequence>(), p.pipeline->options().ignore_id);
    if (!group_ids.is_none()) {
      groups = int64_values(group_ids, "group_ids");
    }
    if (!plan.is_none()) {
      if (!py::isinstance<PlannedBatch>(plan)) {
        fail("plan must be a thdpack.PlannedBatch, not ", type_name(plan));
      }
      planned = plan.cast<PlannedBatch>();
    }
  } catch (const std::exception& e) {
    // The peers are already waiting in this step: tell them before raising here.
    const std::string error = e.what();
    py::gil_scoped_release release;
    p.pipeline->fail_step(error);
  }
  py::gil_scoped_release release;
  const std::span<const SampleView> views(local->views);
  return planned ? p.pipeline->run_planned_step(views, *planned, groups)
                 : p.pipeline->run_step(views, groups);
}

void bind_pipeline_class(py::module_& m) {
  py::class_<PyPipeline>(
      m, "Pipeline", "The distributed pipeline (collective over `world`); see docs/pipeline.md.")
      .def(py::init([](std::shared_ptr<Communicator> world, const PipelineOptions& options,
                       std::shared_ptr<Communicator> dp_group,
                       std::shared_ptr<Communicator> tp_group) {
             auto p = std::make_unique<PyPipeline>();
             p->world = std::move(world);
             p->dp = std::move(dp_group);
             p->tp = std::move(tp_group);
             if ((p->dp == nullptr) != (p->tp == nullptr)) {
               throw InvalidArgument("give both dp_group and tp_group, or neither");
             }
             py::gil_scoped_release release;
             if (p->dp) {
               p->pipeline = std::make_unique<Pipeline>(*p->world, *p->dp, *p->tp, options);
             } else {
               p->pipeline = std::make_unique<Pipeline>(*p->world, options);
             }
             return p;
           }),
           py::arg("world"), py::arg("options"), py::kw_only(), py::arg("dp_group") = nullptr,
           py::arg("tp_group") = nullptr)
      .def("run_step", &run_step_from_python, py::arg("local_samples"), py::kw_only(),
           py::arg("group_ids") = py::none(), py::arg("plan") = py::none(),
           "Collective: this rank's samples of the step (dicts with 'id' and 'input_ids'; empty "
           "on ranks that do not read; 1-D int64 numpy input_ids are read in place, not copied, "
           "and must not change during the call) and optionally one group id >= 0 per sample "
           "(samples of a "
           "group share a micro-batch) -> StepResult. A malformed sample on one rank raises "
           "InvalidArgument on every rank (naming that rank on the others). With `plan` (a "
           "PlannedBatch made elsewhere, the same on every rank) the step delivers it instead of "
           "planning, after every rank has checked it against the gathered step.")
      .def(
          "fail_step",
          [](PyPipeline& p, const std::string& error) {
            py::gil_scoped_release release;
            p.pipeline->fail_step(error);
          },
          py::arg("error"),
          "Collective, instead of run_step on a rank that could not prepare its samples: raises "
          "InvalidArgument(error) here and an InvalidArgument naming this rank on every peer.")
      .def_property_readonly("reads_data",
                             [](const PyPipeline& p) { return p.pipeline->reads_data(); })
      .def_property_readonly("coordinates",
                             [](const PyPipeline& p) {
                               const Coordinates c = p.pipeline->coordinates();
                               py::dict d;
                               d["tp"] = c.tp;
                               d["cp"] = c.cp;
                               d["dp"] = c.dp;
                               d["pp"] = c.pp;
                               return d;
                             })
      .def_property_readonly("options", [](const PyPipeline& p) { return p.pipeline->options(); });
}

/// The pieces of a step that work on their own, and the checks.
void bind_pipeline_pieces(py::module_& m) {
  m.def(
      "reads_data",
      [](const Topology& t, const std::string& reading, int rank) {
        return reads_data(t, reading_of(reading), rank);
      },
      py::arg("topology"), py::arg("reading"), py::arg("rank"));
  m.def(
      "stage_fields",
      [](const Topology& t, int pp_rank) { return fields_dict(stage_fields(t, pp_rank)); },
      py::arg("topology"), py::arg("pp_rank"));
  m.def("plan_global_batch", &plan_global_batch, py::arg("batch"), py::arg("options"),
        py::call_guard<py::gil_scoped_release>());
  m.def(
      "gather_global_batch",
      [](Communicator& world, const PipelineOptions& o, const py::sequence& samples) {
        const std::vector<Sample> local = samples_of(samples, o.ignore_id);
        py::gil_scoped_release release;
        return gather_global_batch(world, o, local);
      },
      py::arg("world"), py::arg("options"), py::arg("local_samples"));
  m.def(
      "reference_microbatches",
      [](const GlobalBatch& batch, const Plan& plan, const py::function& sample_of,
         const PipelineOptions& o, int rank) {
        const auto fn = sample_callback(sample_of, o.ignore_id);
        std::vector<PackedBatch> batches;
        {
          py::gil_scoped_release release;
          batches = reference_microbatches(batch, plan, fn, o, rank);
        }
        std::vector<std::shared_ptr<PackedBatch>> out;
        for (auto& b : batches) out.push_back(std::make_shared<PackedBatch>(std::move(b)));
        return out;
      },
      py::arg("batch"), py::arg("plan"), py::arg("sample_of"), py::arg("options"), py::arg("rank"),
      "What `rank` must hold after a step, computed in one process (sample_of(id) -> sample).");
  m.def(
      "verify_step",
      [](Communicator& world, const PipelineOptions& o, const StepResult& r,
         const py::sequence& local_samples, const py::function& sample_of) {
        const std::vector<Sample> local = samples_of(local_samples, o.ignore_id);
        const auto fn = sample_callback(sample_of, o.ignore_id);
        py::gil_scoped_release release;
        verify_step(world, o, r, local, fn);
      },
      py::arg("world"), py::arg("options"), py::arg("result"), py::arg("local_samples"),
      py::arg("sample_of"),
      "Collective: checks the step against the reference on every rank (InternalError if not).");
}

}  // namespace

void bind_pipeline(py::module_& m) {
  // In this order: later bindings take earlier types as arguments.
  bind_pipeline_options(m);
  bind_step_result(m);
  bind_planned_batches(m);
  bind_pipeline_class(m);
  bind_pipeline_pieces(m);
}

}  // namespace thdpack::python
