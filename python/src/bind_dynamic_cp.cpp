// Dynamic context parallelism: plans whose micro-batches split the dp*cp ranks into CP groups of
// their own size.

#include "bindings.hpp"
#include "strict_values.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/flops.hpp"

namespace thdpack::python {

py::list dynamic_cp_plan_to_python(const DynamicCpPlan& plan) {
  py::list out;
  for (const auto& mb : plan.microbatches) {
    py::list groups;
    for (const auto& g : mb.groups) groups.append(py::make_tuple(g.first_rank, g.size, g.ids));
    out.append(groups);
  }
  return out;
}

void bind_dynamic_cp(py::module_& m) {
  m.def("dynamic_cp_scheduler_names", &dynamic_cp_scheduler_names);
  m.def(
      "schedule_dynamic_cp",
      [](const py::object& padded_lengths, int dp, int cp, int64_t max_seqlen,
         const std::string& name, int multiple, int min_cp, const py::object& ids,
         const py::object& model, double gpu_tflops, double cp_link_gbps,
         double cp_step_overhead_us) {
        const std::vector<int64_t> lengths = int64_values(padded_lengths, "padded_lengths");
        std::vector<int64_t> id_values;
        if (ids.is_none()) {
          for (size_t i = 0; i < lengths.size(); ++i) id_values.push_back(static_cast<int64_t>(i));
        } else {
          id_values = int64_values(ids, "ids");
        }
        DynamicCpOptions o;
        o.dp = dp;
        o.cp = cp;
        o.max_seqlen_per_dp_cp_rank = max_seqlen;
        o.microbatch_multiple = multiple;
        o.min_cp = min_cp;
        if (!model.is_none()) {
          o.cost = CpCostModel::from_model(model_preset(model.cast<std::string>()), gpu_tflops, 2,
                                           cp_link_gbps, cp_step_overhead_us);
        }
        DynamicCpPlan plan;
        {
          py::gil_scoped_release release;
          plan = schedule_dynamic_cp(name, id_values, lengths, o);
          check_dynamic_cp_plan(plan, id_values, lengths, o);
        }
        return dynamic_cp_plan_to_python(plan);
      },
      py::arg("padded_lengths"), py::kw_only(), py::arg("dp"), py::arg("cp"),
      py::arg("max_seqlen_per_dp_cp_rank"), py::arg("scheduler") = "default_dynamic_cp",
      py::arg("microbatch_multiple") = 1, py::arg("min_cp") = 1, py::arg("ids") = py::none(),
      py::arg("model") = py::none(), py::arg("gpu_tflops") = kDefaultGpuTflops,
      py::arg("cp_link_gbps") = kDefaultCpLinkGBps,
      py::arg("cp_step_overhead_us") = kDefaultCpStepOverheadUs,
      "Plans one global batch with dynamic CP (no communication): plan[k] lists micro-batch k's "
      "CP groups as (first_rank, size, ids), in rank order, covering all dp*cp ranks. With a "
      "model preset, balanced_dynamic_cp minimises the full CP cost model (docs/schedulers.md); "
      "without, Megatron's L^2/cp workload.");
}

}  // namespace thdpack::python
